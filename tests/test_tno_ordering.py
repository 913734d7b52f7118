"""TNO sequencer + ordering layer: property tests with an explicit pairwise-order checker."""
import functools
import itertools

import numpy as np
import pytest

from scribe_spark.reference.pairwise_order import pairwise_check
from scribe_spark.tno import groups
from scribe_spark.tno.ordering import Released, Subscriber
from scribe_spark.tno.sequencer import CHAINS, Sequencer, elimination_tree
from scribe_spark.tno.simulation import Placement, Simulation
from tests.helpers import tno_scenario

SAFE = ("etree", "interval")


def test_checker_counts_against_brute_force():
    logs = {0: [1, 2, 3, 4], 1: [2, 1, 3, 4], 2: [4, 3, 9], 3: [1, 2]}
    res = pairwise_check(logs)
    # brute force: subscriber pairs that order a common event pair differently
    bad, inv = 0, 0
    for a, b in itertools.combinations(sorted(logs), 2):
        common = set(logs[a]) & set(logs[b])
        n = sum(1 for x, y in itertools.combinations(common, 2)
                if (logs[a].index(x) < logs[a].index(y)) != (logs[b].index(x) < logs[b].index(y)))
        bad += n > 0
        inv += n
    assert (res.violating_pairs, res.inverted_event_pairs) == (bad, inv) == (4, 4)


@pytest.mark.parametrize("chains", SAFE)
@pytest.mark.parametrize("seed", range(12))
def test_causal_variant_holds_tno_and_notifies_everything(seed, chains):
    res, tags, sim = tno_scenario(seed, chains=chains)
    assert res.ok, res
    assert tags == 0   # a reliable ENS never needs an out-of-order release
    assert len(sim.stats.latency) == 400


@pytest.mark.parametrize("chains", SAFE)
@pytest.mark.parametrize("seed", range(12))
def test_tno_variant_holds_tno_and_notifies_everything(seed, chains):
    res, _, _ = tno_scenario(seed, causal_groups=False, chains=chains)
    assert res.ok, res


@pytest.mark.parametrize("causal_groups", [True, False])
@pytest.mark.parametrize("chains", SAFE)
@pytest.mark.parametrize("seed", range(6))
def test_subscription_changes_keep_tno(seed, chains, causal_groups):
    res, _, sim = tno_scenario(seed, sub_changes=8, unsubs=4, chains=chains, causal_groups=causal_groups)
    assert res.ok, res
    assert len(sim.stats.latency) == sim.requests > 400   # every event and subscription timestamp returned


@pytest.mark.parametrize("causal_groups", [True, False])
@pytest.mark.parametrize("chains", CHAINS)
@pytest.mark.parametrize("seed", range(8))
def test_groups_that_follow_subscriptions_keep_tno(seed, chains, causal_groups):
    # random subscriptions and unsubscriptions, each TM recording them as its requests pass
    res, _, sim = tno_scenario(seed, sub_changes=10, unsubs=6, chains=chains, causal_groups=causal_groups,
                               live=True)
    assert res.violating_pairs == 0, res
    if chains != "literal":          # literal chains may leave a cycle buffered, never a disorder
        assert res.ok, res
    assert len(sim.stats.latency) == sim.requests > 400


def test_groups_that_follow_subscriptions_need_the_held_topics_on_the_request(monkeypatch):
    # a request through the added topics only leaves the held topics' TMs behind: they write and
    # chain by stale groups while the added topics' TMs use the new ones, and subscribers disagree
    chain, plan = Sequencer.subscription_chain, Sequencer.plan
    monkeypatch.setattr(Sequencer, "subscription_chain",
                        lambda self, topics, held=(): chain(self, topics, () if topics else held))
    monkeypatch.setattr(Sequencer, "plan", lambda self, c, own, sub, held=(): plan(self, c, own, sub))
    bad = sum(tno_scenario(seed, sub_changes=10, unsubs=6, live=True)[0].violating_pairs for seed in range(8))
    assert bad > 0


def test_without_ordering_layer_subscribers_disagree():
    res, _, _ = tno_scenario(1, ordered=False)
    assert res.violating_pairs > 0 and res.inverted_event_pairs > 0


def test_broken_sequencer_is_caught():
    # stamping only at the topic's own TM (skipping the chain) leaves timestamps the
    # subscribers cannot order: some events are never notified, or orders differ
    for seed in range(3):
        res, _, _ = tno_scenario(seed, broken=True)
        assert not res.ok


def test_chains_through_group_members_only_can_deadlock():
    # without interval or tree chains, chains overtake each other along different paths and
    # some seeds produce timestamp cycles: events that can never be notified
    stuck = [tno_scenario(s, chains="literal")[0].undelivered > 0 for s in range(30)]
    assert any(stuck)


class SlowLink(Placement):
    """TM t on server t in region t, clients in region 4; the link 1 -> 2 takes 500 ms, all others 1 ms."""

    def delay(self, region_a, region_b, rng):
        return 500.0 if (region_a, region_b) == (1, 2) else 1.0


def four_topic_deadlock(chains: str):
    """Issue 16's smallest case: subscriptions {0,1,3} twice and {1,2} twice, rank = topic id.
    e0 (topic 1) leaves TM1 on the slow link 1 -> 2; e1 (topic 0) passes TM1 after it and, as a
    literal chain 0 -> 1 -> 3, reaches TM3 first; TM3 then stamps e2 (topic 3)."""
    subs = {0: {0, 1, 3}, 1: {0, 1, 3}, 2: {1, 2}, 3: {1, 2}}
    sg = groups.local_groups(subs)
    assert sg == {0: {0, 1, 3}, 1: {0, 1, 2, 3}, 2: {1, 2}, 3: {0, 1, 3}}
    place = SlowLink({t: t for t in range(4)}, [0, 1, 2, 3], {c: 4 for c in subs})
    subscribers = {c: Subscriber(c, set(ts)) for c, ts in subs.items()}
    sim = Simulation(Sequencer(sg, {t: t for t in range(4)}, chains=chains), place, subscribers,
                     lambda eid, client, topic, receivers, rng: np.ones(len(receivers)),
                     np.random.default_rng(0))
    sim.at(0.0, sim.publish, 2, 1)     # e0 on topic 1
    sim.at(1.5, sim.publish, 0, 0)     # e1 on topic 0
    sim.at(5.0, sim.publish, 0, 3)     # e2 on topic 3
    sim.run()
    logs = {c: [e for e, *_ in s.log] for c, s in subscribers.items()}
    return pairwise_check(logs, sum(len(s.waiting) for s in subscribers.values()))


def test_literal_chains_deadlock_on_the_four_topic_case():
    res = four_topic_deadlock("literal")
    assert res.undelivered > 0 and res.violating_pairs == 0   # stuck forever, but nothing out of order
    for chains in SAFE:
        assert four_topic_deadlock(chains).ok, chains


@pytest.mark.parametrize("seed", range(20))
def test_elimination_tree_chains_are_upward_paths_inside_the_interval(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 30))
    subs = {c: set(rng.choice(n, int(rng.integers(1, min(n, 6) + 1)), replace=False).tolist())
            for c in range(int(rng.integers(1, 40)))}
    sg = groups.local_groups(subs, causal=bool(seed % 2))
    for t in range(n):
        sg.setdefault(t, {t})
    rank = {t: int(r) for t, r in zip(range(n), rng.permutation(n))}
    parent = elimination_tree(sg, rank)
    etree, interval = Sequencer(sg, rank, chains="etree"), Sequencer(sg, rank, chains="interval")
    for t in range(n):
        chain = etree.chain(t)
        assert all(parent[a] == b for a, b in zip(chain, chain[1:]))                 # a path up the tree
        assert {u for u in sg[t] if rank[u] >= rank[t]} <= set(chain)                # every higher member
        assert set(chain) <= set(interval.chain(t)) and chain[0] == t
        assert all(rank[a] < rank[b] for a, b in zip(chain, chain[1:]))
    assert set(CHAINS) == {"etree", "interval", "literal"}


def test_unreliable_ens_releases_everything_with_out_of_order_tags():
    res, tags, sim = tno_scenario(2, loss=0.05, ttl=300.0, buffer_size=40)
    assert sim.stats.lost > 0 and tags > 0
    assert res.undelivered == 0   # every received event was eventually released
    notified = sum(len(s.log) for s in sim.subs.values())
    assert tags < notified / 2    # a lost event costs a local disorder, not a cascade


def test_missing_slots_are_what_buffered_events_wait_for():
    from scribe_spark.tno.ordering import Event
    s = Subscriber(0, {1, 2})
    s.receive(Event(10, ((1, 3),), frozenset({1})), 0.0)            # waits for counters 1 and 2 of topic 1
    s.receive(Event(11, ((1, 2), (2, 2)), frozenset({2})), 1.0)     # holds 1#2 as a reference, takes 2#2
    assert s.missing() == {(1, 1), (1, 2), (2, 1)}   # 1#2 is referenced, not held: still missing
    s.receive(Event(12, ((1, 1),), frozenset({1})), 2.0)            # 1#1 arrives: notified
    assert [e for e, *_ in s.log] == [12] and s.missing() == {(1, 2), (2, 1)}


def test_a_state_change_between_arrivals_is_not_missed():
    # the layer checks only a new arrival when nothing else changed; an unsubscription is a change
    from scribe_spark.tno.ordering import Event
    s = Subscriber(0, {0, 1})
    s.receive(Event(10, ((0, 1), (1, 1)), frozenset({0})), 0.0)     # waits for topic 1's counter 1
    s.unsubscribe({1})                                               # ... which no longer matters
    s.receive(Event(11, ((0, 2),), frozenset({0})), 1.0)
    assert [e for e, *_ in s.log] == [10, 11] and not s.waiting


def test_a_full_buffer_releases_its_oldest_arrival_first():
    from scribe_spark.tno.ordering import Event
    s = Subscriber(0, {0}, buffer_size=2)
    for i, c in enumerate((4, 2, 3)):                               # counter 1 never comes
        s.receive(Event(i, ((0, c),), frozenset({0})), float(i))
    # the third arrival overflows the buffer: counter 4 (first in) goes, then 2 and 3, late behind it
    assert [(e, late) for e, _, late, _ in s.log] == [(0, True), (1, True), (2, True)]
    # one forced release, for the buffer; three waited before it (a buffer of 3 would have forced none)
    assert s.released == Released(full=1, ttl=0, peak=3)


def test_forced_releases_are_counted_by_cause():
    from scribe_spark.tno.ordering import Event
    s = Subscriber(0, {0}, buffer_size=5, ttl=100.0)
    s.receive(Event(0, ((0, 3),), frozenset({0})), 0.0)            # waits for counters 1 and 2
    s.receive(Event(1, ((0, 4),), frozenset({0})), 10.0)
    s.tick(50.0)
    assert s.released == Released(full=0, ttl=0, peak=2) and not s.log
    s.tick(100.0)                                                   # counter 3 waited 100 ms: released
    assert s.released == Released(full=0, ttl=1, peak=2)
    assert [(e, late) for e, _, late, _ in s.log] == [(0, True), (1, False)]   # 4 follows 3 in order


@pytest.mark.parametrize("chains", SAFE)
def test_recovery_with_room_enough_keeps_tno_under_loss(chains):
    # buffer and TTL above what recovery needs: every gap is filled before anything is forced out
    for seed in range(3):
        res, tags, sim = tno_scenario(seed, chains=chains, loss=0.05, ttl=5000.0, buffer_size=10_000,
                                      recovery=True)
        forced = functools.reduce(Released.add, (x.released for x in sim.subs.values()), Released())
        assert sim.stats.lost > 0 and sim.stats.recovered > 0 and sim.stats.resent > 0
        assert res.ok and tags == 0 and (forced.full, forced.ttl) == (0, 0), (res, forced)


@pytest.mark.parametrize("chains", SAFE)
def test_recovery_without_loss_keeps_tno(chains):
    for seed in range(3):
        res, tags, sim = tno_scenario(seed, chains=chains, recovery=True, sub_changes=6)
        assert res.ok and tags == 0, res
        assert sim.stats.lost == sim.stats.resent == sim.stats.recovered == 0   # asking never beats the ENS
        assert sim.stats.recovery_messages > 0                                # gaps from reordering: asked


def test_recovery_cuts_out_of_order_releases():
    # TTL above the resend timeout: a sequencer message late by a resend is waited for, not skipped
    without = [tno_scenario(s, loss=0.05, ttl=1000.0, buffer_size=40, recovery=False) for s in range(3)]
    with_ = [tno_scenario(s, loss=0.05, ttl=1000.0, buffer_size=40, recovery=True) for s in range(3)]
    # the same ENS and sequencer losses in both arms
    assert [(w[2].stats.lost, w[2].stats.resent) for w in without] == [(w[2].stats.lost, w[2].stats.resent)
                                                                       for w in with_]
    assert all(w[0].undelivered == 0 for w in without + with_)
    assert sum(w[2].stats.recovered for w in with_) > 0 and sum(w[2].stats.resent for w in with_) > 0
    assert sum(w[1] for w in with_) < sum(w[1] for w in without) / 5                 # far fewer tags
    assert sum(w[0].violating_pairs for w in with_) < sum(w[0].violating_pairs for w in without) / 5


@pytest.mark.parametrize("seed", range(6))
def test_a_subscription_change_keeps_every_event_of_the_topics_held_all_along(seed):
    res, _, sim = tno_scenario(seed, sub_changes=8, chains="etree")
    rng = np.random.default_rng(seed)    # tno_scenario's first draws: the subscriptions at the start
    first = {c: set(rng.choice(12, int(rng.integers(1, 5)), replace=False).tolist()) for c in range(30)}
    assert res.ok, res
    changed = [s for s in sim.subs.values() if s.topics != first[s.sid]]
    assert len(changed) >= 4
    for s in changed:
        want = {ev.eid for _, _, topics, ev in sim.released if not ev.dummy and topics[0] in first[s.sid]}
        got = {e for e, *_ in s.log}
        assert want <= got, (s.sid, len(want - got))


def test_the_causal_check_counts_what_a_direct_reading_finds():
    from scribe_spark.reference.causal_order import causal_violations
    # client 0 is notified of event 1 at 5.0, then publishes event 2 at 6.0: 1 must come before 2
    published = {1: (3, 0.0), 2: (0, 6.0), 3: (0, 1.0)}
    logs = {0: [(1, 5.0)], 1: [(2, 9.0), (1, 10.0)], 2: [(1, 7.0), (2, 8.0)], 4: [(-1, 2.0), (2, 3.0)]}
    assert causal_violations(logs, published) == 1                 # subscriber 1 saw 2 before 1
    logs[0] = [(1, 7.0)]                                          # notified only after publishing 2
    assert causal_violations(logs, published) == 0


def test_the_causal_check_declines_before_building_too_many_pairs(monkeypatch):
    from scribe_spark.reference import causal_order
    published = {1: (3, 0.0), 2: (0, 6.0)}
    logs = {0: [(1, 5.0)], 1: [(2, 9.0), (1, 10.0)], 2: [(1, 7.0), (2, 8.0)]}
    monkeypatch.setattr(causal_order, "MOST_CHECKS", 3)            # 1 pair x 3 subscribers: still made
    assert causal_order.causal_violations(logs, published) == 1
    monkeypatch.setattr(causal_order, "MOST_CHECKS", 2)
    monkeypatch.setattr(causal_order, "_pairs", lambda known: pytest.fail("pairs built"))
    assert causal_order.causal_violations(logs, published) is None


def _causal_violations(seed: int, causal: bool) -> int:
    from scribe_spark.reference.causal_order import causal_violations
    res, _, sim = tno_scenario(seed, causal_groups=causal)
    assert res.ok
    return causal_violations({c: [(e[0], e[1]) for e in s.log] for c, s in sim.subs.items()}, sim.published)


@pytest.mark.parametrize("seed", range(3))
def test_the_causal_variant_keeps_causal_order(seed):
    """With groups from one shared subscription, no subscriber sees an event before one its publisher
    had been notified of."""
    assert _causal_violations(seed, True) == 0


def test_tno_groups_alone_do_not_keep_causal_order():
    """The check is not vacuous: with TNO's groups (two shared subscriptions) the same runs break it."""
    assert sum(_causal_violations(seed, False) for seed in range(3)) > 0


def test_live_groups_follow_what_each_tm_recorded():
    from scribe_spark.tno.live_groups import LiveGroups
    live = LiveGroups.start({0: {1, 2}, 1: {1, 3}, 2: {1, 2, 3}}, range(5), causal=False)
    assert live.group(1) == {1, 2, 3} and live.group(2) == {2, 1} and live.group(4) == {4}
    assert live.group(3) == {3, 1}                      # 2 and 3 share one subscription only
    assert live.record(2, 1, frozenset({1, 2, 3}))      # TM_2 learns client 1 holds 2 and 3 now
    assert live.group(2) == {1, 2, 3} and live.group(3) == {3, 1}   # TM_3 has not heard yet
    assert live.record(1, 2, frozenset({3})) and live.group(1) == {1}   # client 2 left topic 1
    assert not live.record(4, 0, frozenset({1, 2}))     # not its topic: nothing to record
    causal = LiveGroups.start({0: {1, 2}}, range(3), causal=True)
    assert causal.group(1) == {1, 2} and causal.group(0) == {0}
