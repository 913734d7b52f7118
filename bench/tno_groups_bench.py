"""Benchmark: sequencing groups on Spark vs one SciPy A^T A, same subscriptions, one run.

    .venv/bin/python bench/tno_groups_bench.py [--clients 10000] [--per-client 200] [--topics 1000]
                                               [--repeat 3]

Subscriptions are drawn as in experiment T1 (seed 1) for both popularity models. Spark
time covers: sequencing groups + sizes from a cached (subscriber, topic) DataFrame, collected
to the driver; SciPy time covers the same sizes from the same arrays. Best of --repeat runs
(after one warm-up run for Spark); the sizes are asserted equal.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=10_000)
    ap.add_argument("--per-client", type=int, default=200)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from scribe_spark.laws import MODELS, popularity
    from scribe_spark.reference.sequencing_groups import group_sizes as reference_sizes
    from scribe_spark.spark.session import SESSION_CONF
    from scribe_spark.tno import groups
    from scribe_spark.workloads.popularity import draw_subscriptions
    spark = (SparkSession.builder.master(args.master).config(map=SESSION_CONF)
             .config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "8g")
             .config("spark.sql.shuffle.partitions", os.environ.get("SHUFFLE_PARTITIONS", "4"))
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    print("| popularity | subscriptions | Spark s (best) | SciPy s (best) | Spark / SciPy | mean |SG| |")
    print("|---|---|---|---|---|---|")
    for model in MODELS:
        sub, top = draw_subscriptions(args.clients, args.per_client, popularity(args.topics, model),
                                      np.random.default_rng(1))
        df = spark.createDataFrame(pd.DataFrame({groups.SUBSCRIBER: sub.astype(np.int32),
                                                 groups.TOPIC: top.astype(np.int32)})).cache()
        df.count()

        def spark_run():
            s = groups.sequencing_group_sizes(df).toPandas()
            out = np.zeros(args.topics, dtype=np.int64)
            out[s.topic.to_numpy()] = s["size"].to_numpy()
            return out
        spark_run()  # warm-up: Python workers, code generation
        t_spark, t_scipy = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            a = spark_run()
            t_spark.append(time.perf_counter() - t)
            t = time.perf_counter()
            b = reference_sizes(sub, top, args.topics)
            t_scipy.append(time.perf_counter() - t)
            assert (a == b).all(), "Spark and SciPy sequencing groups differ"
        print(f"| {model} | {len(sub):,} | {min(t_spark):.2f} | {min(t_scipy):.2f} | "
              f"{min(t_spark) / min(t_scipy):.1f}x | {a[a > 0].mean():.1f} |", flush=True)
        df.unpersist()
    spark.stop()


if __name__ == "__main__":
    main()
