"""Benchmark: Pastry in simulated time (`pastry.timed`) at growing sizes, optionally against the reference.

    .venv/bin/python bench/timed_bench.py 1000 10000 [--duration-s 600] [--mean-session-s 3600]
                                          [--lookups-per-node-s 0.01] [--check] [--no-table-repair]
                                          [--master local[2]]

For each N: nodes on a transit-stub network (the library's default router graph, seed 1), every
node converged at time 0; each node crashes at an exponential time of mean `--mean-session-s`
(those after the end never crash; nobody joins); lookups of random keys from random nodes at
uniform times, `--lookups-per-node-s` per node per second. Timers: keep-alive 30 s, failure timeout
3 s, retransmission timeout 500 ms, 1 ms a hop, lookups lost after 60 s. Prints per N: wall time,
passes of the fixed point and seconds per pass, events at the fixed point, lookups by outcome,
and with `--check` the sequential reference's wall time and whether every lookup outcome,
latency, detection, repair and message count agrees (exit 1 if not; `churn`'s own check).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scribe_spark import ids, topology  # noqa: E402
from scribe_spark.pastry.kernels import Ring  # noqa: E402
from scribe_spark.streams import Purpose, stream  # noqa: E402

TIMERS = dict(keepalive_ms=30_000.0, failure_timeout_ms=3_000.0, rto_ms=500.0, proc_ms=1.0,
              lookup_timeout_ms=60_000.0)


class _Passes(logging.Handler):
    """Collects the fixed point's per-pass seconds from its progress lines."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if msg.startswith("timed pastry") and " pass " in msg:   # the maintenance's passes, then the lookups
            self.seconds.append(float(msg.rsplit("(", 1)[1].rstrip("s)")))


def workload(n: int, duration_s: float, mean_session_s: float, rate: float):
    """The ring, the crashes and the lookups for one size."""
    rng = np.random.default_rng([1, n])
    routers = topology.transit_stub(stream(1, Purpose.NETWORK))
    hi, lo = ids.random_ids(n, rng)
    prox = topology.on_sites("transit-stub", n, routers.delay, topology.LAN_DELAY_MS, rng, distinct=False)
    ring = Ring(hi, lo, 4, 16, 32, prox)
    until = duration_s * 1000.0
    ends = rng.exponential(mean_session_s * 1000.0, n)
    crashes = {int(v): float(ends[v]) for v in np.flatnonzero(ends < until)}
    count = int(rate * n * duration_s)
    khi, klo = ids.random_ids(count, rng)
    lookups = pd.DataFrame({"t_issue": np.sort(rng.uniform(0.0, until, count)),
                            "src": rng.integers(0, n, count), "key_hi": khi, "key_lo": klo})
    return ring, crashes, lookups, until


def check(ring, crashes, lookups, until, timers, got) -> tuple[float, bool]:
    """The sequential reference on the same inputs: its wall time and whether it agrees."""
    from scribe_spark.experiments.churn import Departures, reference_differences
    t0 = time.time()
    differ = reference_differences(ring, timers, 0, Departures.of_times(crashes), lookups, until, until, got)
    return time.time() - t0, not differ


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sizes", type=int, nargs="+")
    ap.add_argument("--duration-s", type=float, default=600.0)
    ap.add_argument("--mean-session-s", type=float, default=3600.0)
    ap.add_argument("--lookups-per-node-s", type=float, default=0.01)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--no-table-repair", action="store_true", help="table entries found dead stay empty")
    ap.add_argument("--master", default="local[2]")
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    passes = _Passes()
    logging.getLogger("scribe_spark.bsp").addHandler(passes)
    logging.getLogger("scribe_spark.bsp").setLevel(logging.INFO)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # the workers need this environment's packages
    from pyspark.sql import SparkSession

    from scribe_spark.pastry import timed
    from scribe_spark.pastry.overlay import build_overlay
    from scribe_spark.spark.session import SESSION_CONF
    spark = (SparkSession.builder.master(a.master).config(map=SESSION_CONF)
             # the heap a job gets from run.sh (with 1 GiB, the JVM's default, 10,000 nodes ran out)
             .config("spark.driver.memory", os.environ.get("SCRIBE_DRIVER_MEMORY", "8g"))
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    ok = True
    for n in a.sizes:
        ring, crashes, lookups, until = workload(n, a.duration_s, a.mean_session_s, a.lookups_per_node_s)
        passes.seconds = []
        t0 = time.time()
        overlay = build_overlay(spark, ring)
        built = time.time() - t0
        timers = timed.Timers(**TIMERS, table_repair=not a.no_table_repair)
        got = timed.simulate(overlay, crashes, lookups, timers, until)
        took = time.time() - t0
        outcomes = got.lookups.outcome.value_counts().to_dict()
        line = (f"N={n:,} simulated {a.duration_s:.0f}s crashes={len(crashes):,} lookups={len(lookups):,}: "
                f"{took:.1f}s (overlay {built:.1f}s), {got.passes} passes "
                f"[{' '.join(f'{s:.1f}' for s in passes.seconds)}], detections={len(got.detections):,} "
                f"repairs={len(got.repairs):,} table refills={len(got.table_repairs):,} outcomes={outcomes}")
        if a.check:
            ref_s, same = check(ring, crashes, lookups, until, timers, got)
            ok &= same
            line += f"; reference {ref_s:.1f}s, {'same' if same else 'DIFFERENT'}"
        print(line, flush=True)
        overlay.unpersist()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
