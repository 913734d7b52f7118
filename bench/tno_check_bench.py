"""Benchmark: the Spark TNO check against the direct pairwise comparison, on synthetic logs.

    .venv/bin/python bench/tno_check_bench.py [--points 300:3000 1000:10000 10000:100000]
                                              [--pairwise-up-to 300] [--swaps 0.01] [--jitter 0]
                                              [--master local[2]]

A point SUBSCRIBERS:EVENTS: 1,000 topics, each event on one topic drawn by Zipf(1) popularity,
each subscriber on 10 distinct topics drawn uniformly (so about 1% of the events each, 10^7
notifications at 10,000:100,000, the size issue 16 asks of T3); every subscriber is
notified of the events of its topics in one common order, then `--swaps` (default 1%) of its
adjacent notifications are swapped, so subscribers disagree; with `--jitter J` each subscriber is
instead notified in the order of (event id + a uniform draw in [0, J)), as delays that reorder
events up to J ids apart without an ordering layer would (disagreement dense). Prints per point the
notifications, the Spark check's wall time and counts, and, up to `--pairwise-up-to`
subscribers, the pairwise comparison's time and whether both agree. Seed 1.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def synthetic_logs(subscribers: int, events: int, swaps: float, jitter: float = 0.0,
                   seed: int = 1) -> dict[int, np.ndarray]:
    """Return {subscriber: event ids in notification order} for the workload described above."""
    rng = np.random.default_rng(seed)
    topics = 1000
    probs = 1.0 / np.arange(1, topics + 1)
    probs /= probs.sum()
    event_topic = rng.choice(topics, size=events, p=probs)
    by_topic = [np.flatnonzero(event_topic == t) for t in range(topics)]
    logs = {}
    for s in range(subscribers):
        mine = np.sort(np.concatenate([by_topic[t] for t in rng.choice(topics, 10, replace=False)]))
        k = int(swaps * len(mine))
        if jitter:
            mine = mine[np.argsort(mine + rng.uniform(0, jitter, len(mine)), kind="stable")]
        elif len(mine) > 1 and k:
            for i in rng.choice(len(mine) - 1, size=k, replace=False):
                mine[[i, i + 1]] = mine[[i + 1, i]]
        logs[s] = mine
    return logs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", nargs="+", default=["300:3000", "1000:10000", "10000:100000"])
    ap.add_argument("--pairwise-up-to", type=int, default=300)
    ap.add_argument("--swaps", type=float, default=0.01)
    ap.add_argument("--jitter", type=float, default=0.0)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    if args.jitter < 0:
        ap.error("--jitter must be >= 0")

    from pyspark.sql import SparkSession

    from scribe_spark.reference.pairwise_order import pairwise_check
    from scribe_spark.spark.session import SESSION_CONF
    from scribe_spark.tno.check import check_tno, notifications_frame

    spark = (SparkSession.builder.master(args.master).appName("tno check bench")
             .config("spark.driver.memory", "8g").config("spark.sql.shuffle.partitions", "8")
             .config(map=SESSION_CONF)
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    print("| subscribers | events | notifications | Spark check, s | violating pairs | inverted event pairs "
          "| pairwise, s | same |")
    print("|---|---|---|---|---|---|---|---|")
    for point in args.points:
        subscribers, events = (int(x) for x in point.split(":"))
        logs = synthetic_logs(subscribers, events, args.swaps, args.jitter)
        notifications = int(sum(len(v) for v in logs.values()))
        t0 = time.time()
        times = {s: v.astype(float) for s, v in logs.items()}     # reference order: event id
        got = check_tno(notifications_frame(spark, logs, times), subscribers)
        spark_s = time.time() - t0
        pair_s, same = "—", "—"
        if subscribers <= args.pairwise_up_to:
            t0 = time.time()
            want = pairwise_check({s: v.tolist() for s, v in logs.items()})
            pair_s, same = f"{time.time() - t0:.1f}", str(want == got)
        print(f"| {subscribers:,} | {events:,} | {notifications:,} | {spark_s:.1f} | {got.violating_pairs:,} "
              f"| {got.inverted_event_pairs:,} | {pair_s} | {same} |", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
