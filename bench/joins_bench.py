"""Benchmark: an overlay grown by Pastry joins, against the converged construction, at scale.

    .venv/bin/python bench/joins_bench.py [--nodes 5000] [--initial 500] [--batch 500] [--lookups 50000]
                                          [--improve none,rows,tables]

Plane model, b=4, |L|=16, |M|=32, seed 1. `--initial` members start converged; the others
join in batches of `--batch` concurrent joins (`joins.grow`). Reports: lookups from random
nodes to random keys that reach the numerically closest node (brute force) and their mean
hops, next to the converged overlay's; leaf sets equal to the converged ones; the share of the
routing-table entries the converged construction fills that hold its proximity-best node;
messages per newcomer by kind; wall time of growing; and per routing-table row, the entries
that are empty, proximity-optimal and sub-optimal, for each second join phase (`--improve`).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--initial", type=int, default=500)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--lookups", type=int, default=50_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--improve", default="none,rows,tables",
                    help="second join phases to compare, comma-separated (none, rows, tables)")
    args = ap.parse_args()
    logging.basicConfig(format="  %(message)s", stream=sys.stderr)
    logging.getLogger("scribe_spark").setLevel(logging.INFO)   # superstep progress lines
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from scribe_spark import ids, topology
    from scribe_spark.pastry import joins
    from scribe_spark.pastry import overlay as ov
    from scribe_spark.pastry.kernels import Ring
    from scribe_spark.reference import closest, routing_tables
    spark = (SparkSession.builder.master(args.master).config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "8g").config("spark.sql.shuffle.partitions", "4")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    rng = np.random.default_rng(1)
    hi, lo = ids.random_ids(args.nodes, rng)
    ring = Ring(hi, lo, 4, 16, 32, topology.plane(args.nodes, rng))
    converged = ov.build_overlay(spark, ring, "proximity", seed=1)
    want = converged.state.toPandas().set_index("id").sort_index()
    src = rng.integers(0, ring.n, args.lookups)
    khi, klo = ids.random_ids(args.lookups, rng)
    alive = np.ones(ring.n, dtype=bool)
    c = closest.checked_lookups(converged, src, khi, klo, alive)
    newcomers = args.nodes - args.initial
    print(f"\n{args.nodes} nodes ({args.initial} converged, then batches of {args.batch}) on {args.master}; "
          f"converged overlay: {c.correct.mean():.4%} of {args.lookups} lookups correct, "
          f"{c.hops.mean():.3f} mean hops")
    quality = {}
    for improve in args.improve.split(","):
        t0 = time.time()
        grown, counts = joins.grow(spark, ring, args.initial, args.batch, np.random.default_rng(2), improve)
        t_grow = time.time() - t0
        g = closest.checked_lookups(grown, src, khi, klo, alive)
        got = grown.state.toPandas().set_index("id").sort_index()
        same_leaf = np.mean([set(np.asarray(a).tolist()) == set(np.asarray(b).tolist())
                             for a, b in zip(got.leaf, want.leaf)])
        cmp = routing_tables.compare_tables(ring, got, want)
        quality[improve] = routing_tables.row_quality(ring, got, want).set_index("row")
        print(f"\n## improve = {improve}: grown in {t_grow:.0f} s; lookups {g.correct.mean():.4%} correct, "
              f"{g.hops.mean():.3f} mean hops; leaf sets equal to the converged ones: {same_leaf:.2%}; "
              f"routing-table entries: {cmp['entries']:,} filled by the converged construction, "
              f"{cmp['best_share']:.1%} hold its proximity-best node, {cmp['invalid']} invalid")
        print("messages per newcomer: " + ", ".join(f"{k} {v / newcomers:.1f}" for k, v in counts.items()))
        grown.unpersist()
    names = list(quality)
    print("\nPer routing-table row, of the slots the converged construction fills: empty / optimal / "
          "sub-optimal entries")
    print("| row | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for row in quality[names[0]].index:
        cells = [" / ".join(f"{q.at[row, k]:,}" for k in ("empty", "optimal", "suboptimal"))
                 for q in quality.values()]
        print(f"| {row} | " + " | ".join(cells) + " |")
    spark.stop()


if __name__ == "__main__":
    main()
