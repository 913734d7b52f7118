"""Nodes that come back, in the Spark engine, against the sequential reference event for event."""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from scribe_spark.experiments.churn import Departures, _differences, reference_run
from scribe_spark.pastry import overlay as ov
from scribe_spark.pastry import timed
from tests.helpers import small_ring

TM = timed.Timers(keepalive_ms=1000.0, failure_timeout_ms=1000.0, rto_ms=500.0, proc_ms=1.0,
                  lookup_timeout_ms=20_000.0, table_repair=False)   # the tiny churn run repairs them
NO_LOOKUPS = pd.DataFrame({"t_issue": [], "src": [], "key_hi": [], "key_lo": []})


def _reference(ring, seed: int, crashes: dict, leaves: dict, back: dict, until: float,
               lookups: pd.DataFrame = NO_LOOKUPS):
    """The sequential reference's run on the same ring, links, keep-alive phases and lookups."""
    return reference_run(ring, TM, seed, Departures.of_times(crashes, leaves, back), lookups, until)


def _times(of: dict, v: int) -> list[float]:
    """A node's times in {node: time or times}."""
    t = of.get(v, [])
    return list(t) if isinstance(t, list) else [t]


def _add(of: dict, v: int, t: float) -> None:
    """One more time of node v."""
    of[v] = [*_times(of, v), t]


@pytest.mark.slow
def test_recoveries_give_the_reference_run_in_passes_that_renew_only_what_moved(spark, monkeypatch):
    """Crashes and leaves at random times, most followed by a return, and returns timed to meet the other
    protocols' timers: a node down between its probes and their timers (its stale timers do nothing), a
    node back while a member of its last leaf set is down (it declares that member), a node back before
    the timer of a leaf-set request or a lookup sent to it while it was down (asked again or routed
    again, not declared). Every pass after the first derives anew only what the nodes whose events
    changed decide (`_renewed`), whatever their number. The lookups, detections, leaf-set requests,
    repairs and messages by kind and by bin equal the reference's, on a latency matrix with |L| = 8 (the
    tiny churn run, whose passes are mostly whole, has the plane, |L| = 16 and table repair)."""
    ring = small_ring(100, model="matrix", leaf=8, seed=2)
    seed, until = 3, 36_000.0
    rng = np.random.default_rng(4)
    down = [int(v) for v in rng.choice(ring.n, 16, replace=False)]
    crashes = {v: float(rng.uniform(0, 15_000)) for v in down[:12]}
    leaves = {v: float(rng.uniform(0, 15_000)) for v in down[12:]}
    back = {v: t + float(rng.uniform(100, 6_000)) for v, t in list({**crashes, **leaves}.items())[:10]}
    for i, (v, t) in enumerate(list(back.items())[:6]):   # down again, as a crash or a leave; half back again
        again = t + float(rng.uniform(500, 4_000))
        _add(leaves if i % 2 else crashes, v, again)
        if i < 3:
            _add(back, v, again + float(rng.uniform(100, 3_000)))
    free = [int(v) for v in range(ring.n) if v not in crashes and v not in leaves]
    leaf = timed.kernels.leaf_sets(ring, np.array(free))
    phase = timed.keepalive_phase(np.arange(ring.n), seed, TM.keepalive_ms)
    # x is down from 1 ms after a tick to 99 ms later, before its probes' timers; its nearest predecessor m
    # was down when that tick's probe came: m is declared by x's rejoin's timer, not by the stale probe's
    x, m = free[0], int(leaf[0][0])
    tick = float(phase[x]) + 2 * TM.keepalive_ms
    crashes[x], back[x], crashes[m] = tick + 1.0, tick + 100.0, tick - 200.0
    back.pop(m, None)
    leaves.pop(m, None)
    y, z = free[1], int(leaf[1][4])   # y back while its nearest successor z is down for good
    assert not {y, z} & {x, m}
    crashes[y], back[y], crashes[z] = 25_000.0, 27_000.0, 26_000.0
    # u's nearest successor v crashes, and u asks its farthest successor w (none of them met before)
    u, v, w = next((a, *leaf[i][[4, 7]].tolist()) for i, a in enumerate(free)
                   if not {a, *leaf[i][[4, 7]].tolist()} & {*crashes, *leaves, x, y, z, m})
    crashes[v] = 20_000.0
    t_d = min(t for f, d, _c, t in _reference(ring, seed, crashes, leaves, back, until).detections
              if (f, d) == (v, u))
    crashes[w], back[w] = t_d - 50.0, t_d + 300.0   # w is down when asked, and back before u's timer
    # a lookup of q's key from p, a member of q's leaf set, reaches q down; q is back and tells p before
    # p's retransmission timer: p declares nothing, and the lookup reaches q at its second try
    p, q = next((a, int(leaf[i][0])) for i, a in enumerate(free)
                if not {a, int(leaf[i][0])} & {*crashes, *leaves, x, y, z, m, u, v, w})
    crashes[q], back[q] = 30_000.0, 30_300.0
    # r is down twice: its first rejoins' replies come while it is down again, and their timers 1 ms after
    # its second return, before any reply to its second rejoins: they do nothing
    r = next(a for a in free if a not in {x, m, y, z, u, v, w, p, q})
    crashes[r], back[r] = [12_000.0, 12_102.0], [12_100.0, 12_100.0 + TM.failure_timeout_ms - 1.0]
    k = 40   # and lookups at random after x's return
    lookups = pd.DataFrame({"t_issue": np.r_[np.sort(rng.uniform(8_000, until, k)), 30_100.0],
                            "src": np.r_[rng.integers(0, ring.n, k), p],
                            "key_hi": np.r_[rng.integers(0, 2**63, k), ring.hi[q]].astype(np.uint64),
                            "key_lo": np.r_[rng.integers(0, 2**63, k), ring.lo[q]].astype(np.uint64)})
    overlay = ov.build_overlay(spark, ring, "proximity", seed=seed)
    monkeypatch.setattr(timed, "RENEW_SHARE", 1.0)
    said: list[str] = []   # a handler on the logger itself: the suite's jobs may stop its propagation
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: said.append(record.getMessage())
    logger = logging.getLogger("scribe_spark.pastry.timed")
    logger.addHandler(handler)
    monkeypatch.setattr(logger, "level", logging.INFO)
    try:
        got = timed.simulate(overlay, crashes, lookups, TM, until, seed=seed, bin_ms=5000.0,
                             leaves=leaves, recoveries=back)
    finally:
        logger.removeHandler(handler)
        overlay.unpersist()
    ref = _reference(ring, seed, crashes, leaves, back, until, lookups)
    assert _differences(got, ref, 5000.0) == []
    renewing = [line for line in said if "derives anew only" in line]
    assert len(renewing) == got.passes - 1   # every pass but the maintenance's first
    assert any(not line.endswith("of 0 nodes decide") for line in renewing)
    assert ref.messages["rejoin"] > 0 and ref.messages["announce"] > 0
    assert got.maintenance["rejoin"].sum() == ref.messages["rejoin"]
    assert [t for f, d, _c, t in ref.detections if (f, d) == (m, x)] == [back[x] + TM.failure_timeout_ms]
    assert (z, y, crashes[z], back[y] + TM.failure_timeout_ms) in ref.detections
    assert (w, u) not in {(f, d) for f, d, _c, _t in ref.detections}   # asked again instead
    assert ref.messages["leaf_request"] > len(ref.repair_starts)
    last = ref.lookups[-1]
    assert (last["outcome"], last["dest"], last["timeouts"]) == ("correct", q, 1)
    assert (q, p) not in {(f, d) for f, d, _c, _t in ref.detections}
    assert {look["outcome"] for look in ref.lookups} >= {"correct", "not_issued"}
    goings = {(f, c) for f, _d, c, _t in ref.detections}
    assert len(goings) - len({f for f, _c in goings}) >= 3   # nodes noticed gone twice
    assert not [d for _f, d, _c, t in ref.detections if d == r and back[r][1] <= t < 14_000.0]
