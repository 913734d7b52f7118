"""Joins in simulated time in the Spark engine, against the sequential reference event for event."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from scribe_spark.experiments.churn import Departures, _differences, reference_run
from scribe_spark.pastry import overlay as ov
from scribe_spark.pastry import timed
from tests.helpers import small_ring

TM = timed.Timers(keepalive_ms=1000.0, failure_timeout_ms=1000.0, rto_ms=500.0, proc_ms=1.0,
                  lookup_timeout_ms=2500.0)


@pytest.mark.slow
def test_newcomers_joining_in_the_spark_engine_give_the_reference_run(spark):
    """Ten newcomers join a 60-node ring, one every 215 ms, beside four nodes absent at the start (a steady
    start: in no member's state, each holding the state it had with every node in), two of which come back
    as returning nodes and rejoin through that state's leaf set (the members of it still absent are
    declared). Crashes are timed against the joins (found on the reference's quiet routes): node 2's
    contact dies before the JOIN reaches it (it asks the next nearest), node 8's second hop dies before
    the JOIN reaches it (routed around, declared, its table entry repaired), node 11 dies before its state
    is built (it joins again on its return), and node 22's JOIN is lost with its forwarder, which dies
    waiting for the timeout of a dead next hop (22 tries again after the lookup timeout). The joins'
    build times, the retries, lookups, detections, repairs and every message count per bin equal the
    reference's, whose members start converged among themselves."""
    ring = small_ring(60, model="matrix", leaf=8, seed=5)
    seed, until = 2, 5_200.0
    rng = np.random.default_rng(8)
    absent = np.sort(rng.choice(ring.n, 14, replace=False))
    new = absent[:10]
    crashes: dict = {int(v): -math.inf for v in absent}
    back: dict = {int(v): float(t) for v, t in zip(absent[:12], np.linspace(200, 3000, len(absent))[:12])}
    crashes.update({31: 201.0, 4: 418.5, 11: [-math.inf, 632.0], 28: 1293.5, 14: 1500.0})
    back[11] = [back[11], 2000.0]
    back[int(absent[10])] = 100.0   # back before the newcomers of its last leaf set join: it declares them
    members = np.setdiff1d(np.arange(ring.n), absent)
    sources = np.setdiff1d(members, [31, 4, 28, 14])
    k = 10
    lookups = pd.DataFrame({"t_issue": np.sort(rng.uniform(0, until, k)), "src": rng.choice(sources, k),
                            "key_hi": rng.integers(0, 2**63, k).astype(np.uint64),
                            "key_lo": rng.integers(0, 2**63, k).astype(np.uint64)})
    overlay = ov.build_overlay(spark, ring, "proximity", seed=seed, absent=absent)
    try:
        state = overlay.state.toPandas().set_index("id")
        assert not overlay.converged
        assert not np.isin(np.concatenate(state.leaf[members].to_numpy()), absent).any()
        assert np.isin(np.concatenate(state.leaf[absent[10:]].to_numpy()), absent).any()   # every node in
        got = timed.simulate(overlay, crashes, lookups, TM, until, seed=seed, bin_ms=2000.0, recoveries=back,
                             newcomers=new)
    finally:
        overlay.unpersist()
    ref = reference_run(ring, TM, seed, Departures.of_times(crashes, {}, back), lookups, until,
                        newcomers=set(new.tolist()))
    assert _differences(got, ref, 2000.0) == []
    timeouts = {(x, at, dead) for x, at, dead, _t in ref.join_timeouts}
    assert {(2, 2, 31), (8, 57, 4), (22, 14, 28)} <= timeouts   # a dead contact, a dead hop, a lost JOIN
    assert [x for x, _t in ref.joins_lost] == [22] and len(ref.joined) == len(new)
    assert dict(ref.joined)[11] > 2000.0 and ref.messages["table_request"] > 0
    assert ref.messages["rejoin"] > 0 and ref.messages["announce"] > 0
    assert any(c == -math.inf for _f, _d, c, _t in ref.detections)   # a rejoin to a node still absent
    assert {look["outcome"] for look in ref.lookups} >= {"correct"}
