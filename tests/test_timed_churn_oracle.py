"""The rounds of SUBSCRIBEs of churn's reference against one sequential simulation of Pastry and Scribe.

`churn._reference_rounds` settles the SUBSCRIBEs by rounds of the two references; `reference.timed_churn`
issues, routes and grafts them on one heap, as they happen. Both run here without Spark, on the driver's
own draws of the tiny churn run with tree repair on: they must give the same SUBSCRIBEs, the same routes,
detections, repairs and messages, and the same copies, heartbeats, heartbeat timeouts and holdings.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from scribe_spark.config import ChurnParams
from scribe_spark.experiments import churn, timed_events
from scribe_spark.loader import load
from scribe_spark.reference.timed_churn import ChurnResult, Scribing, TimedChurn
from scribe_spark.workloads.network import make_ring, shared_network
from tests.helpers import ROOT

TINY = ROOT / "conf" / "tiny" / "churn.toml"
PASTRY = ("lookups", "paths", "detections", "repairs", "repair_starts", "messages", "sent_at", "table_asks",
          "table_repairs", "leaf", "joined", "joins_lost", "join_timeouts")
# the tiny run with tree repair, its heartbeats counted per ms, and more churn: slower failure detection
# and a longer retransmission timeout, so that SUBSCRIBEs time out, get lost, end unfinished or make new
# roots; and more events, some of which reach a node that a SUBSCRIBE reached but that delivers it only
# after a timeout there, so that the events are lost as it is not a root yet
SCENARIOS = {"churn": ["keepalive_s=[20.0]", "mean_session_s=[80.0]", "rto_ms=800.0", "seed=7"],
             "roots": ["keepalive_s=[20.0]", "mean_session_s=[60.0]", "topics=16",
                       "publications_per_topic_s=1.0", "seed=17"]}


@dataclass
class Both:
    """One scenario's inputs and the two simulations of it."""

    p: ChurnParams
    published: np.ndarray        # each event's topic
    rounds: object               # the rounds' last Pastry run (TimedResult)
    scribe: object               # the rounds' last Scribe (timed_events.Reference)
    subs: pd.DataFrame           # the SUBSCRIBEs the rounds settled on
    one: ChurnResult


def _scenario(overrides: list[str]) -> Both:
    """Draw the run's inputs as the job's driver does, then simulate them in rounds and on one heap."""
    p = load(ChurnParams, TINY, ["resubscribe=true", "bin_s=0.001", *overrides])
    ring = make_ring(churn.ring_size(p), p, p.seed, *shared_network(p, p.seed))
    at = churn.Point(p.mean_session_s[0], p.keepalive_s[0])
    gone, lookups = churn.workload(p, at.mean_session_s)
    events = timed_events.workload(p, gone.absent)
    routed = timed_events.routed(lookups, events)
    sim = churn.reference_pastry(ring, churn.timers(p, at), p.seed, gone)
    one = _one_heap(p, sim, gone, routed, events)
    rounds, scribe, subs = churn._reference_rounds(p, ring, gone, routed, events, sim)
    return Both(p, events.published.topic.to_numpy(), rounds, scribe, subs, one)


def _one_heap(p: ChurnParams, sim, gone: churn.Departures, routed: pd.DataFrame,
              events: timed_events.Events) -> ChurnResult:
    """The one-heap simulation on the reference Pastry's ring, links, timers and phases."""
    hb = churn.heartbeats(p)
    subscribers = list(zip(events.subscribers.topic.tolist(), events.subscribers.node.tolist()))
    scribing = Scribing(events.topics, subscribers, hb.period_ms, hb.timeout_ms,
                        lambda v: float(hb.phase(np.array([v]))[0]), p.resubscribe)
    keys = (routed[c].to_numpy(np.uint64).tolist() for c in ("key_hi", "key_lo"))
    asked = list(zip(routed.t_issue.tolist(), routed.src.tolist(), *keys))
    one = TimedChurn(sim.ring, sim.link, sim.params, sim.phase, sim.absent)
    return one.simulate(gone.crashes, asked, events.published.topic.tolist(), scribing, 1000.0 * p.duration_s,
                        gone.leaves, gone.returns, set(gone.newcomers.tolist()))


def _scribe_frames(both: Both) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame]:
    """The one heap's copies, heartbeats per bin and timeouts, as `timed_events.Reference` has them."""
    out, hb = both.one.scribe, churn.heartbeats(both.p)
    copies = pd.DataFrame(out.copies, columns=["event", "node", "t"]).astype(timed_events.COPY_TYPES)
    timeouts = pd.DataFrame(out.detections, columns=["topic", "parent", "child", "t"]).astype(
        {c: timed_events.TIMEOUT_TYPES[c] for c in ("topic", "parent", "child", "t")})
    return (copies.sort_values(["event", "node", "t"], kind="stable").reset_index(drop=True),
            hb.bins.count(out.heartbeats),
            timeouts.sort_values(["topic", "parent", "child", "t"], kind="stable").reset_index(drop=True))


def _first_difference(both: Both) -> str | None:
    """The first item in which the one heap and the rounds differ (None: none), with the first rows."""
    subs = both.subs
    mine = [(t, n, k) for t, n, k in both.one.subscribes]
    if mine != list(zip(subs.t_issue.tolist(), subs.src.tolist(), subs.topic.tolist())):
        return f"SUBSCRIBEs: {mine} != {subs[['t_issue', 'src', 'topic']].values.tolist()}"
    for name in PASTRY:
        a, b = getattr(both.one.pastry, name), getattr(both.rounds, name)
        if a != b:
            first = next(((x, y) for x, y in zip(a, b) if x != y), (len(a), len(b))) if isinstance(a, list) \
                else (a, b)
            return f"Pastry {name}: {first}"
    copies, beats, timeouts = _scribe_frames(both)
    for name, same in (("copies", copies.equals(both.scribe.copies)),
                       ("heartbeats per ms", np.array_equal(beats, both.scribe.heartbeats)),
                       ("heartbeat timeouts", timeouts.equals(both.scribe.timeouts)),
                       ("holdings", both.one.holdings == both.scribe.holdings)):
        if not same:
            return f"Scribe {name}"
    return None


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_rounds_settle_on_what_one_sequential_simulation_gives(scenario):
    """Every SUBSCRIBE issued (time, node, topic), every lookup's, event's and SUBSCRIBE's route (outcome,
    node, hops, timeouts, latency, SUBSCRIBE hops), every detection, repair and message, every copy of the
    events (node, arrival), the heartbeats per ms, the heartbeat timeouts and who held which topic when,
    made by which SUBSCRIBE hop: the same in the rounds' fixed point and in the one heap. (One test per
    scenario: two would simulate it twice when the suite's processes split them.)"""
    both = _scenario(SCENARIOS[scenario])
    assert _first_difference(both) is None
    _repairs_trees(both)


def _repairs_trees(both: Both) -> None:
    """The comparison has something to compare: children that declared their parent dead and subscribers
    that came back re-subscribed, SUBSCRIBEs grafted after some hops, some after timeouts, and events went
    down the repaired trees to nodes that SUBSCRIBEs made hold their topics."""
    first, routes = both.one.first, both.one.pastry.lookups
    subs = routes[first:]
    outcomes = pd.Series([r["outcome"] for r in subs]).value_counts()
    assert len(subs) == len(both.subs) >= 9 and outcomes["grafted"] >= 8
    declared = {(t, child) for _tp, _parent, child, t in both.one.scribe.detections}
    from_timeouts = [(t, v) for t, v, _k in both.one.subscribes if (t, v) in declared]
    assert 0 < len(from_timeouts) < len(subs)   # the others: subscribers at their returns
    assert max(len(both.one.pastry.paths[first + k]) for k in range(len(subs))) > 2
    assert sum(r["timeouts"] > 0 for r in subs) > 0 and len(both.one.scribe.copies) > 500
    made = {(topic, v): [(a, b) for a, b, by, _hop in spans if by >= 0] for (topic, v), spans in
            both.one.holdings.items()}
    copies = both.one.scribe.copies
    assert any(a <= t < b for event, v, t in copies for a, b in made.get((both.published[event], v), ()))
    if both.p.seed == 7:   # the churn scenario: new roots, and SUBSCRIBEs lost and under way at the end
        assert {"correct", "lost", "unfinished"} <= set(outcomes.index)
    if both.p.seed == 17:   # the roots scenario: events lost at a node not yet the root a SUBSCRIBE made it
        assert both.one.late_roots


def test_a_repair_begun_anew_waits_for_its_own_request():
    """A lookup finds dead the node that filled a routing-table entry while the entry's repair was still
    asking on (a newcomer's notice refilled it): the repair begun then waits for its own request, and the
    answer of the earlier one is ignored. The reference once took both answers and failed on the second."""
    p = load(ChurnParams, TINY, ["resubscribe=true", "seed=18", "keepalive_s=[20.0]", "mean_session_s=[60.0]",
                                 "topics=16", "publications_per_topic_s=1.0"])
    ring = make_ring(churn.ring_size(p), p, p.seed, *shared_network(p, p.seed))
    at = churn.Point(p.mean_session_s[0], p.keepalive_s[0])
    gone, lookups = churn.workload(p, at.mean_session_s)
    events = timed_events.workload(p, gone.absent)
    sim = churn.reference_pastry(ring, churn.timers(p, at), p.seed, gone)
    one = _one_heap(p, sim, gone, timed_events.routed(lookups, events), events)
    asked = {}
    for x, s, w, t in one.pastry.table_asks:
        asked.setdefault((x, s), []).append(t)
    repaired = {(x, s) for x, s, _e, _t in one.pastry.table_repairs}
    assert repaired and any(len(ts) > 1 for ts in asked.values())
