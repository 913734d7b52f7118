"""Pastry in simulated time on Spark against the sequential discrete-event reference, event for event."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from scribe_spark import bsp
from scribe_spark.pastry import timed
from scribe_spark.pastry.overlay import build_overlay
from scribe_spark.reference.timed_pastry import TimedParams, TimedPastry
from tests.helpers import small_ring
from tests.test_timed_pastry import random_lookups

# T_fd a whole number of keep-alive periods: timeouts fall on ticks, the ties the engine must order
TIMERS = dict(keepalive_ms=1000.0, failure_timeout_ms=1000.0, rto_ms=500.0, proc_ms=1.0,
              lookup_timeout_ms=20_000.0)


def _runs(spark, n: int, crashed: int, lookups: int, until: float, seed: int = 3):
    """The same crashes and lookups through the Spark engine and the sequential reference."""
    ring = small_ring(n, model="matrix", leaf=8, seed=seed)
    rng = np.random.default_rng(seed + 4)
    dead = rng.choice(n, crashed, replace=False)
    crashes = {int(v): float(t) for v, t in zip(dead, rng.uniform(0.0, 0.7 * until, crashed))}
    asked = random_lookups(rng, n, lookups, 0.0, until)
    phase = timed.keepalive_phase(np.arange(n), seed, TIMERS["keepalive_ms"])

    def link(u: int, v: int) -> float:
        return float(ring.prox.dist([u], [v])[0])
    ref = TimedPastry(ring, link, TimedParams(**TIMERS), phase).run(crashes, asked, until)
    frame = pd.DataFrame(asked, columns=["t_issue", "src", "key_hi", "key_lo"]).astype(
        {"key_hi": np.uint64, "key_lo": np.uint64})
    got = timed.simulate(build_overlay(spark, ring), crashes, frame, timed.Timers(**TIMERS), until, seed=seed)
    return ref, got


def test_the_same_run_as_the_sequential_reference(spark):
    """Crashes, keep-alives, leaf-set repairs and lookups: every outcome, time and message count equal."""
    ref, got = _runs(spark, 60, 5, 40, 3500.0)
    want = pd.DataFrame(ref.lookups)
    assert set(want.outcome) >= {"correct", "not_issued", "unfinished"} and ref.detections and ref.repairs
    assert want.timeouts.sum() > 0   # some lookups meet dead nodes
    for column in ("outcome", "dest", "hops", "timeouts"):
        assert got.lookups[column].tolist() == want[column].tolist(), column
    latency = got.lookups.latency_ms.to_numpy(float)
    assert np.array_equal(latency, want.latency_ms.to_numpy(float), equal_nan=True)
    assert sorted(zip(got.detections.failed, got.detections.detector, got.detections.t)) == \
        sorted((y, x, t) for y, x, _crash, t in ref.detections)
    assert sorted(zip(got.repair_starts.node, got.repair_starts.failed, got.repair_starts.asked,
                      got.repair_starts.t)) == sorted(ref.repair_starts)
    assert sorted(zip(got.repairs.node, got.repairs.t)) == sorted(ref.repairs)
    assert got.messages == ref.messages
    assert got.passes >= 3   # detections, then repairs, then what the repairs changed


def test_fixed_point_runs_until_a_pass_changes_nothing(spark, progress):
    """A chain of events, each one unit after its cause, takes one pass per link and one to confirm."""
    seed = spark.createDataFrame([(0.0,)], "t double")

    def derive(events, p, since):
        later = events.filter(F.col("t") < 4).select((F.col("t") + 1).alias("t"))
        return bsp.Pass(seed.unionByName(later).distinct())
    last, passes = bsp.fixed_point("chain", seed.limit(0), derive, bound=10)
    assert sorted(r.t for r in last.events.collect()) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert passes == 6 and progress[-1].startswith("chain pass 6: 5 events, 0 changed")
    with pytest.raises(bsp.SuperstepBoundExceeded, match="chain: the events still changed after 3 passes"):
        bsp.fixed_point("chain", seed.limit(0), derive, bound=3)


def test_as_of_reads_the_version_in_force(spark):
    """A row reads the version whose interval holds its time; none in force gives nulls."""
    versions = spark.createDataFrame([(1, float("-inf"), 5.0, "a"), (1, 5.0, float("inf"), "b")],
                                     "node long, t_from double, t_to double, state string")
    rows = spark.createDataFrame([(1, 4.9), (1, 5.0), (2, 1.0)], "at long, t double")
    got = {(r.at, r.t): r.state for r in bsp.as_of(rows, "at", "t", versions).collect()}
    assert got == {(1, 4.9): "a", (1, 5.0): "b", (2, 1.0): None}


def test_timers_refuse_what_breaks_causality():
    """A zero hop cost would let an effect happen at its cause's time: refused."""
    with pytest.raises(ValueError, match="proc_ms must be positive"):
        timed.Timers(1000.0, 1000.0, 500.0, 0.0, 20_000.0)
