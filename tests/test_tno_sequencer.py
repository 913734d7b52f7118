"""T2: the sequencer's queues against independent computations, and the tno_sequencer job."""
import numpy as np
import pandas as pd
import pytest

from scribe_spark.laws import popularity
from scribe_spark.tno.sequencer import Sequencer, chain_profile, precedence_rank, saturation
from scribe_spark.tno.simulation import Placement, Simulation, site_placement
from scribe_spark.workloads.popularity import site_popularity, site_ranks
from tests.helpers import tno_scenario


class FixedDelay(Placement):
    def delay(self, region_a, region_b, rng):
        return 10.0 if region_a == region_b else 100.0


def test_one_topic_manager_is_a_fifo_queue():
    """Latencies equal the Lindley recursion d_k = max(a_k, d_{k-1}) + s of a single server queue."""
    rng = np.random.default_rng(3)
    place = FixedDelay({0: 0}, [0], {0: 1})
    sim = Simulation(Sequencer({0: {0}}, {0: 0}), place, {}, None, rng, service_ms=0.7)
    sent = np.sort(rng.uniform(0, 200, 400))
    for t in sent:
        sim.at(float(t), sim.publish, 0, 0)
    sim.run()
    done, expected = -np.inf, []
    for t in sent:
        done = max(t + 100.0, done) + 0.7      # long link to the server, then service
        expected.append(done + 100.0 - t)      # and the long link back
    assert np.allclose(sim.stats.latency, expected)
    assert sim.tm_work == {0: 400}


def test_timestamp_stages_are_counted_and_relays_are_free():
    """Every event's chain: one service per stage that reads or writes the timestamp, none at relays."""
    groups = {0: {0, 2}, 1: {1}, 2: {0, 2}, 3: {3}}
    rank = {t: t for t in groups}                    # the chain of an event on 0 is 0 -> 1 (relay) -> 2
    place = FixedDelay({t: 0 for t in groups}, [0], {0: 0})
    sim = Simulation(Sequencer(groups, rank, chains="interval"), place, {}, None, np.random.default_rng(0),
                     service_ms=2.0)
    sim.at(0.0, sim.publish, 0, 0)
    sim.run()
    assert sim.tm_work == {0: 1, 1: 0, 2: 1}
    assert sim.stats.latency == [10.0 + 2.0 + 2.0 + 10.0]   # same server: TM hops cost no network delay


def _offered(groups: dict, topics: list[int], rate: float, cores: int, service: float, message: float = 0.0,
             duration: float = 2000.0):
    """One server hosting every TM; `rate` events per second spread over `topics`; the finished run."""
    rng = np.random.default_rng(5)
    place = FixedDelay({t: 0 for t in groups}, [0], {0: 0})
    sim = Simulation(Sequencer(groups, {t: t for t in groups}), place, {}, None, rng, service_ms=service,
                     message_ms=message, cores=cores)
    n = int(rate * duration / 1000)
    for t, topic in zip(np.sort(rng.uniform(0, duration, n)), rng.choice(topics, n)):
        sim.at(float(t), sim.publish, 0, int(topic))
    sim.run()
    return sim


def _throughput(sim, duration: float = 2000.0) -> float:
    done = np.asarray(sim.stats.completed_at)
    return ((done >= duration / 2) & (done < duration)).sum() / (duration / 2000)


@pytest.mark.parametrize("cores, tms, capacity", [(1, 4, 1000), (4, 4, 4000), (4, 1, 1000), (2, 4, 2000)])
def test_a_server_saturates_at_its_cores_or_its_busiest_topic_manager(cores, tms, capacity):
    """Stages of 1 ms: a server serves `cores` at once, a TM one; offered twice that, throughput is capped
    at the smaller capacity, and the chains' prediction says which."""
    groups = {t: {t} for t in range(4)}
    sim = _offered(groups, list(range(tms)), 2 * capacity, cores, service=1.0)
    assert _throughput(sim) == pytest.approx(capacity, rel=0.03)
    probs = np.bincount(np.arange(tms), minlength=4) / tms
    profile = chain_profile(Sequencer(groups, {t: t for t in groups}), {t: 0 for t in groups}, probs)
    sat = saturation(profile, 1.0, 0.0, cores)
    assert sat.rate_per_s == pytest.approx(capacity)
    assert sat.bottleneck == ("server 1" if tms > cores else "TM of topic 1")
    below = _offered(groups, list(range(tms)), capacity / 2, cores, service=1.0)
    assert _throughput(below) == pytest.approx(capacity / 2, rel=0.1)   # below capacity: what is offered


def test_messages_cost_core_time_and_a_busy_topic_manager_does_not_block_the_others():
    """Each message in or out costs `message_ms`; a TM with a long queue leaves the other cores to the
    other TMs (first come, first served among TMs free to run)."""
    groups = {t: {t} for t in range(2)}
    sim = _offered(groups, [0], 1000, cores=2, service=0.0, message=0.5)      # 1 ms per event at TM 0
    assert sim.server_busy == {0: pytest.approx(1.0 * len(sim.stats.latency))}
    hot = _offered(groups, [0] * 9 + [1], 3000, cores=2, service=1.0)        # TM 0 gets 2,700/s: saturated
    lat = np.asarray(hot.stats.latency)
    assert np.median(lat) > 120                        # TM 0's events queue up ...
    assert lat.min() == pytest.approx(10.0 + 1.0 + 10.0)   # ... while TM 1's go straight through


def test_bytes_handled_and_forwarded_per_server():
    """client -> server 0 -> server 1 -> client: server 0 forwards all it handles, server 1 nothing."""
    groups = {0: {0, 1}, 1: {0, 1}}
    place = FixedDelay({0: 0, 1: 1}, [0, 1], {0: 0})
    sim = Simulation(Sequencer(groups, {0: 0, 1: 1}), place, {}, None, np.random.default_rng(0))
    sim.at(0.0, sim.publish, 0, 0)
    sim.run()
    size = 24 + 12 * 2                                # header + two timestamp entries
    assert sim.stats.bytes_in == {0: size, 1: size}
    assert sim.stats.bytes_out == {0: size}
    assert sim.stats.latency == [10.0 + 100.0 + 100.0]


def test_site_rankings_put_own_topics_first_then_interleave():
    rank = site_ranks([[0, 1], [2, 3], [4, 5]])
    assert rank[0].tolist() == [0, 1, 2, 4, 3, 5]     # own 0, 1; then site 1's and 2's first, then seconds
    assert rank[1].tolist() == [3, 5, 0, 1, 2, 4]     # site 1 sees site 2 before site 0
    probs = site_popularity([[0, 1], [2, 3], [4, 5]], "geographic")
    assert np.allclose(probs[2][[4, 5, 0, 2, 1, 3]], popularity(6, "geographic"))
    place = site_placement(topics=10, sites=3, clients=7)
    assert [place.server_of[t] for t in range(10)] == [0] * 4 + [1] * 3 + [2] * 3
    assert [place.client_region[c] for c in range(7)] == [0, 0, 0, 1, 1, 2, 2]
    assert place.server_region == [0, 1, 2]


@pytest.mark.parametrize("seed", range(4))
def test_tno_holds_with_busy_topic_managers(seed):
    res, _, sim = tno_scenario(seed, causal_groups=False, service_ms=1.5, events=600)
    assert res.ok, res
    assert max(sim.tm_free.values()) > 0


def test_popular_first_precedence_gives_short_chains():
    probs = np.array([0.7, 0.1, 0.1, 0.05, 0.05])
    groups = {0: {0, 1, 2, 3, 4}, 1: {0, 1}, 2: {0, 2}, 3: {0, 3}, 4: {0, 4}}
    server_of = {t: 0 for t in groups}
    first = chain_profile(Sequencer(groups, precedence_rank(5, "popular_first"), chains="interval"),
                          server_of, probs)
    last = chain_profile(Sequencer(groups, precedence_rank(5, "popular_last"), chains="interval"),
                         server_of, probs)
    # popular first (the most popular topic ranks highest, as topic 1 does by topic id): an event on
    # topic t climbs the interval from t up to topic 0 (t + 1 TMs, relays included)
    assert first["mean_tms_visited"] == pytest.approx(0.7 * 1 + 0.1 * 2 + 0.1 * 3 + 0.05 * 4 + 0.05 * 5)
    # popular last: an event on topic 0 visits every TM, the others only their own
    assert last["mean_tms_visited"] == pytest.approx(0.7 * 5 + 0.3 * 1)
    assert first["tm_visits"][0] == pytest.approx(1.0)     # every event ends at the most popular topic's TM


def test_by_topic_id_chains_move_towards_lower_ids_as_in_the_paper():
    # the paper's Fig. 4: an event on T2 with SG = {T1, T2} goes TM_T2 -> TM_T1 (ids 1 -> 0 here)
    rank = precedence_rank(3, "topic_id")
    groups = {0: {0, 1}, 1: {0, 1}, 2: {2}}
    for rule in ("etree", "interval", "literal"):
        seq = Sequencer(groups, rank, chains=rule)
        assert seq.chain(1) == [1, 0] and seq.chain(0) == [0], rule
        assert seq.subscription_chain({0, 1}) == [1, 0], rule
    assert Sequencer(groups, precedence_rank(3, "reverse_topic_id")).chain(0) == [0, 1]


@pytest.mark.slow
def test_tno_sequencer_job(tiny):
    folder = tiny("tno_sequencer")
    t = pd.read_csv(folder / "sequencer.csv")
    assert set(t.popularity) == {"geographic", "spray_and_diffuse"} and len(t) == 20   # etree 6, interval 4
    # the same members write stages under both rules; tree chains are sub-paths of the intervals
    at5 = t[t.topics_per_client == 5]
    shape = ["mean_tms_visited", "mean_timestamp_stages"]
    rule = at5.groupby(["popularity", "chains"])[shape].first().unstack()
    assert np.allclose(rule.mean_timestamp_stages.etree, rule.mean_timestamp_stages.interval)
    assert (rule.mean_tms_visited.etree <= rule.mean_tms_visited.interval + 1e-9).all()
    assert (rule.mean_tms_visited.etree < rule.mean_tms_visited.interval).any()
    sweep = t[t.sweep == "subscriptions"]
    assert sorted(set(sweep.topics_per_client)) == [2, 10]
    assert (sweep.subscriptions == 200 * sweep.topics_per_client).all()
    # a flatter law sends more of a site's subscriptions to other sites' topics, at every load
    share = t.groupby(["topics_per_client", "popularity"]).remote_subscription_share.first().unstack()
    assert (share.geographic < share.spray_and_diffuse).all() and (share.geographic > 0).all()
    assert (t.completed == t.events).all()
    assert (t.p50_latency_ms >= 2 * 10.0 * 0.5).all()     # at least a client->server->client round trip
    free = t[t.capacity_per_s > 3 * t.rate_per_s]
    assert np.allclose(free.throughput_per_s, free.rate_per_s,
                       rtol=0.15)   # far from saturation: all get through
    over = t[t.capacity_per_s < 0.5 * t.rate_per_s]
    assert len(over) > 0 and (over.throughput_per_s < 0.8 * over.rate_per_s).all()
    assert (over.mean_latency_ms > 2 * free.mean_latency_ms.max()).all()
    bw = pd.read_csv(folder / "bandwidth.csv")
    for pop, g in bw.groupby(["popularity", "chains"]):   # a server's share of the bytes sent between servers
        total = g.inter_server_bytes.sum()
        want = g.inter_server_bytes / total if total else 0 * g.inter_server_bytes
        assert np.allclose(g.bandwidth_share, want, atol=1e-6), pop
    assert bw[bw.popularity == "spray_and_diffuse"].inter_server_bytes.sum() > 0   # chains cross servers
    assert np.allclose(bw.groupby(["popularity", "chains"]).timestamp_stage_share.sum(), 1.0)
    assert (bw.handled_bytes > 0).all()
    assert np.allclose(bw.outgoing_percent, 100 * bw.inter_server_bytes / bw.handled_bytes)
    for png in ("latency_vs_rate", "throughput_vs_rate", "latency_cdf", "throughput_vs_service",
                "bandwidth_share", "outgoing_bandwidth", "latency_vs_subscriptions",
                "throughput_vs_subscriptions"):
        assert (folder / f"{png}.png").stat().st_size > 0
