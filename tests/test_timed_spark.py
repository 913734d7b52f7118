"""Pastry in simulated time on Spark against the sequential discrete-event reference, event for event."""
from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql import functions as F

from scribe_spark import bsp
from scribe_spark.pastry import timed


@pytest.mark.slow
def test_the_job_equals_the_sequential_reference_and_bins_what_it_simulated(tiny):
    """The tiny run's own check passed: every lookup's outcome, node, hops, timeouts and latency, every
    detection, repair request and repair, and the messages by kind and by bin equal the sequential
    reference's (the job stops otherwise), with crashes and graceful leaves. Its timeouts fall on
    keep-alive ticks: the ties to order."""
    folder = tiny("pastry_timed")
    assert "The sequential reference simulation gave the same" in (folder / "summary.md").read_text()
    t, r = pd.read_csv(folder / "timeline.csv"), pd.read_csv(folder / "repairs.csv")
    assert t.time_s.tolist() == [0, 10, 20, 30, 40, 50]
    gone = t.crashes + t.leaves
    assert gone.sum() == len(r) > 3 and (t.members == 100 - gone.cumsum()).all()
    assert r.graceful.any() and not r.graceful.all() and (t.leave_msgs_per_node_s > 0).any()
    assert (t.timeouts_per_lookup > 0).any() and r.leaf_sets_repaired_after_s.notna().sum() > 3
    assert (t.lookup_success + t.lookup_wrong + t.lookup_lost <= 1 + 1e-12).all()
    # before the first crash every node probes its 16 leaf-set members every 3 s, and each probe is answered
    assert t.keepalive_msgs_per_node_s.iat[0] == pytest.approx(2 * 16 / 3, rel=0.05)
    # a holder probes within a keep-alive period of a crash and declares it failure_timeout_s later; a
    # leave is declared as its notice arrives, within a link delay (at most 1,414 ms on the plane)
    crashed, left = r[~r.graceful], r[r.graceful]
    assert (crashed.detected_after_s.dropna() <= 3.0 + 3.0).all()
    assert (left.detected_after_s <= 1.415 + 0.001).all() and (left.leaf_detectors > 0).all()


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
