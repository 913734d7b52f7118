"""Scribe's SUBSCRIBEs routed by the timed Pastry: they stop where their topic is held, in both engines."""
from __future__ import annotations

import numpy as np
import pandas as pd

from scribe_spark.experiments.churn import Departures, _differences, reference_pastry, reference_result
from scribe_spark.pastry import overlay as ov
from scribe_spark.pastry import timed
from tests.helpers import small_ring

TM = timed.Timers(keepalive_ms=1000.0, failure_timeout_ms=1000.0, rto_ms=500.0, proc_ms=1.0,
                  lookup_timeout_ms=20_000.0, table_repair=False)


def test_subscribes_stop_at_the_first_node_holding_their_topic_and_give_their_hops(spark):
    """Lookups and SUBSCRIBEs of 3 topics share a timed run with crashes. A SUBSCRIBE stops at the first
    node after its source that holds its topic when it arrives (outcome "grafted"), else goes on as a
    lookup does, timeouts and declarations included; a lookup of the same key never stops. The Spark run
    gives the reference's outcomes, hops, timeouts, latencies, detections, repairs and messages, and the
    same hops of each SUBSCRIBE (its source first, one per arrival, not per timeout)."""
    ring = small_ring(60, model="matrix", leaf=8, seed=5)
    seed, until = 2, 8_000.0
    rng = np.random.default_rng(6)
    down = [int(v) for v in rng.choice(ring.n, 3, replace=False)]
    crashes = {v: float(rng.uniform(500.0, 3_000.0)) for v in down}
    keys = rng.integers(0, 2**63, (3, 2)).astype(np.uint64)
    live = np.setdiff1d(np.arange(ring.n), down)
    # each topic is held by 12 live nodes, each from a time in the first half of the run until a time after
    held = [(k, int(v), float(a), float(a + rng.uniform(1_000.0, 20_000.0))) for k in range(3)
            for v, a in zip(rng.choice(live, 12, replace=False), rng.uniform(0, 4_000, 12))]
    n, m = 20, 40   # lookups (half of them of the topics' keys), then SUBSCRIBEs
    topic = rng.integers(0, 3, n + m)
    own = np.arange(n + m) < n // 2
    random = rng.integers(0, 2**63, (n + m, 2)).astype(np.uint64)
    hi, lo = (np.where(own, random[:, i], keys[topic, i]) for i in (0, 1))
    routes = pd.DataFrame({"t_issue": rng.uniform(1_000.0, 6_000.0, n + m), "src": rng.choice(live, n + m),
                           "key_hi": hi, "key_lo": lo})
    gone = Departures.of_times(crashes)
    key = list(zip(routes.key_hi.tolist(), routes.key_lo.tolist()))
    spans: dict = {}

    def holds(lid: int, v: int, t: float, hop: int) -> bool:
        """The reference's stop: a holding made before this hop, in (time, SUBSCRIBE, hop) order."""
        mine = spans.get((*key[lid], v), ())
        return any((a, by, made) < (t, lid - n, hop) and t < b for a, b, by, made in mine)

    def run_reference(rows: list[tuple]):
        spans.clear()
        for k, v, a, b, by, made in rows:
            spans.setdefault((int(keys[k, 0]), int(keys[k, 1]), v), []).append((a, b, by, made))
        return reference_result(reference_pastry(ring, TM, seed, gone), gone, routes, until, subscribes=n,
                                holds=holds)
    # a holding made by a SUBSCRIBE's own first hop (as the round before's trees have it) does not stop it
    first = run_reference([(k, v, a, b, -1, -1) for k, v, a, b in held])
    taken = {(k, v) for k, v, *_ in held}
    j, (v1, t1) = next((lid, hops[1]) for lid, hops in sorted(first.paths.items()) if len(hops) > 2
                       and (int(topic[lid]), hops[1][0]) not in taken)
    held.append((int(topic[j]), v1, t1, np.inf, j - n, 1))
    rows = [(*r, -1, -1) if len(r) == 4 else r for r in held]
    k, v, a, b, by, made = (np.array(c) for c in zip(*rows))
    holders = pd.DataFrame({"key_hi": keys[k, 0], "key_lo": keys[k, 1], "node": v, "t_from": a, "t_to": b,
                            "by": by, "hop": made})
    overlay = ov.build_overlay(spark, ring, "proximity", seed=seed)
    try:
        got = timed.simulate(overlay, crashes, routes, TM, until, seed=seed, bin_ms=5_000.0, subscribes=n,
                             holders=holders)
    finally:
        overlay.unpersist()
    ref = run_reference(rows)
    assert _differences(got, ref, 5_000.0) == []
    assert ref.paths[j][:3] == first.paths[j][:3]   # it went on past the node its own hop made a holder
    mine = {lid: list(zip(g.node.tolist(), g.t.tolist())) for lid, g in got.paths.groupby("lid")}
    assert mine == {lid: hops for lid, hops in ref.paths.items() if hops}
    outcome = got.lookups.outcome.to_numpy()
    assert "grafted" not in set(outcome[:n]) and (outcome[n:] == "grafted").sum() > 5
    assert {"correct"} <= set(outcome[n:]) and got.lookups.timeouts.sum() > 0
    for lid in np.flatnonzero(outcome == "grafted"):   # each stopped at a holder, the first on its way
        hops = mine[lid]
        stops = [holds(lid, v, t, i) for i, (v, t) in enumerate(hops) if i]
        assert stops == [False] * (len(hops) - 2) + [True]
        assert got.lookups.dest[lid] == hops[-1][0]
