"""Benchmark: what one Spark action costs on a small frame, counted two ways.

    .venv/bin/python bench/action_cost.py [--master local[2]] [--repeat 40]

`DataFrame.count()` plans a global aggregate (two stages and a shuffle); `bsp.rows` counts the
rows of the executed plan in one stage. Prints the mean milliseconds per call for a locally
checkpointed 2,000-row frame and for a join + aggregate over two such frames, each way.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def mean_ms(call: Callable[[], object], repeat: int) -> float:
    """Mean wall milliseconds of `call` over `repeat` calls, after one warm-up call."""
    call()
    t0 = time.perf_counter()
    for _ in range(repeat):
        call()
    return (time.perf_counter() - t0) / repeat * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=40)
    args = ap.parse_args()

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from scribe_spark import bsp
    from scribe_spark.spark.session import SESSION_CONF

    spark = (SparkSession.builder.master(args.master).appName("action cost bench").config(map=SESSION_CONF)
             .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    cut = spark.range(2000).withColumn("v", F.col("id") % 7).localCheckpoint()
    other = spark.range(1000).withColumn("w", F.col("id") % 5).localCheckpoint()

    def joined():
        return cut.join(other, "id").groupBy("v").agg(F.sum("w"))

    print("| frame | DataFrame.count(), ms | bsp.rows, ms |")
    print("|---|---|---|")
    for name, frame in (("checkpointed, 2,000 rows", lambda: cut), ("join + aggregate", joined)):
        print(f"| {name} | {mean_ms(lambda: frame().count(), args.repeat):.0f} "
              f"| {mean_ms(lambda: bsp.rows(frame()), args.repeat):.0f} |")
    spark.stop()


if __name__ == "__main__":
    main()
