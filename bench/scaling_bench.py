"""Scaling benchmark: Pastry state build + 200,000 lookups and Scribe tree build (1,500 topics) vs N.

    .venv/bin/python bench/scaling_bench.py [--sizes 10000 100000 300000 1000000]
                                            [--modes local[1] local[2] standalone] [--out FILE]
                                            [--proximity transit-stub|plane]
                                            [--check-lookups 10000] [--check-topics 30]

Each (mode, N) is one `spark-submit` of this file in child mode, so nothing is shared between
points. `standalone` starts the local cluster with `./run.sh cluster start` (master + 2 workers,
1 core each) and stops it at the end, also on errors. Per point it records, per phase
(state build, routing, subscribe, check): wall time and shuffle bytes written (from Spark's
event log, attributed to phases by job group), and the peak summed RSS of the driver's process tree plus,
on the cluster, the executors' process trees (the idle master/worker daemons are not counted).
Where the bytes go: the cached frames' size in memory and on disk after each phase (Spark's
storage info), the pickled size of the ring (about the size of the files each executor maps once),
bytes spilled per phase (event log), and the peak RSS of each kind of process (JVMs, the
Python driver, Python workers: their peaks need not coincide).
The workload is the S1 one: transit-stub network (`--proximity plane`: the plane model instead),
proximity neighbour selection, b=4, |L|=16, |M|=32, topic sizes floor(N r^-1.25 + 0.5), seed 1.

The check phase (`--check-lookups`, `--check-topics`; 0 skips it) routes lookups to random keys
and compares each destination with the numerically closest node found by brute force, and checks
the trees of a random sample of topics and of the largest one with `reference.tree_shape` (one
root, the closest node; one parent per member; every subscriber reaches the root; no cycles).
Its counts of wrong lookups and tree faults are in the result; all must be 0. Each point's wall
time and peak RSS include the check phase (points recorded before it existed do not).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import proctree  # noqa: E402  (bench/ is the script's folder)

PHASES = ("build", "route", "subscribe", "check")


def child(n: int, lookups: int, evlog: str, check_lookups: int, check_topics: int, proximity: str) -> None:
    import numpy as np
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from scribe_spark import ids
    from scribe_spark.config import AnyProximity, ScribeParams
    from scribe_spark.pastry import overlay as ov
    from scribe_spark.reference.closest import checked_lookups
    from scribe_spark.reference.tree_shape import tree_faults
    from scribe_spark.scribe import trees as tr
    from scribe_spark.spark.session import SESSION_CONF
    from scribe_spark.streams import Purpose
    from scribe_spark.workloads import spark_groups
    from scribe_spark.workloads.network import make_ring, shared_network
    from scribe_spark.workloads.scribe_groups import group_sizes, named_topics

    # Arrow for pandas -> Spark, as the jobs have it (session.py): without it the 39.5M subscriptions
    # of N = 10M go through pickled rows and the driver's JVM runs out of heap
    spark = (SparkSession.builder.appName(f"scaling N={n}").config("spark.eventLog.enabled", "true")
             .config(map=SESSION_CONF)
             .config("spark.eventLog.dir", evlog).config("spark.eventLog.compress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    sc = spark.sparkContext
    p = ScribeParams(nodes=n)
    model = AnyProximity(proximity=proximity, b=p.b, leaf_set=p.leaf_set, neighborhood=p.neighborhood,
                         topology=p.topology)    # S1's Pastry keys; the plane model has no routers
    routers, _ = shared_network(model, p.seed)
    ring = make_ring(n, model, p.seed, routers, spark=spark)
    out = {"n": n, "app": sc.applicationId, "proximity": proximity}

    sc.setJobGroup("build", "build")
    t0 = time.time()
    overlay = ov.build_overlay(spark, ring, "proximity", seed=p.seed)
    out["build_s"] = time.time() - t0
    out["ring_mb"] = sum(a.nbytes for a in vars(ring).values() if isinstance(a, np.ndarray)) / 2**20
    out.update(cached(sc, "build"))

    sc.setJobGroup("route", "route")
    msgs = ov.lookups(spark, ring, lookups, p.seed, Purpose.LOOKUPS, n)
    t0 = time.time()
    agg = ov.route(overlay, msgs).agg(F.mean("hops").alias("h"), F.count("*").alias("c")).first()
    out["route_s"] = time.time() - t0
    out["mean_hops"], out["lookups"] = float(agg["h"]), int(agg["c"])
    out.update(cached(sc, "route"))

    sc.setJobGroup("subscribe", "subscribe")
    topics, sizes = named_topics(p), group_sizes(p)
    # drawn by Spark tasks, as the job draws them, and checkpointed as its admitted subscriptions are
    counts = spark_groups.chunk_counts(sizes, n, p.seed)
    subs = spark_groups.members(spark, counts, n, p.seed).localCheckpoint()
    t0 = time.time()
    trees = tr.subscribe(overlay, topics, subs)
    out["edges"] = trees.edges.count()
    out["subscribe_s"] = time.time() - t0
    out["subscriptions"] = int(sizes.sum())
    out.update(cached(sc, "subscribe"))

    if check_lookups or check_topics:
        sc.setJobGroup("check", "check")
        t0 = time.time()
        rng = np.random.default_rng([p.seed, n, 3])
        log = logging.getLogger("scribe_spark")
        if check_lookups:
            khi, klo = ids.random_ids(check_lookups, rng)
            src = rng.integers(0, n, check_lookups)
            routed = checked_lookups(overlay, src, khi, klo, np.ones(n, dtype=bool))
            out["check_lookups"], out["check_lookups_wrong"] = check_lookups, int((~routed.correct).sum())
            log.info("check: %d of %d lookups wrong", out["check_lookups_wrong"], check_lookups)
        if check_topics:
            largest = int(sizes.argmax())    # the deepest, widest tree
            drawn = rng.choice(topics.n, min(check_topics, topics.n) - 1, replace=False)
            sample = np.union1d(drawn, [largest])
            edges = trees.edges.where(F.col("topic").isin([int(t) for t in sample])).toPandas()
            checked = subs.where(F.col("topic").isin([int(t) for t in sample])).toPandas()
            out["check_topics"] = sample.tolist()
            out["check_topic_subscriptions"] = len(checked)
            out["check_tree_faults"] = tree_faults(ring, topics.hi, topics.lo, sample, edges,
                                                   trees.roots.toPandas(), checked.topic.to_numpy(),
                                                   checked.node.to_numpy())
            log.info("check: tree faults over %d topics: %s", len(sample), out["check_tree_faults"])
        out["check_s"] = time.time() - t0
    spark.stop()
    print("RESULT " + json.dumps(out), flush=True)


def cached(sc, phase: str) -> dict:
    """MiB of cached frames (state, checkpoints, chunks) in memory and on disk, now: in all and per RDD."""
    infos = sc._jsc.sc().getRDDStorageInfo()
    rdds = [[i.id(), i.name()[:60].replace("\n", " "), i.storageLevel().description(),
             i.numCachedPartitions(), i.numPartitions(), round(i.memSize() / 2**20, 1),
             round(i.diskSize() / 2**20, 1)] for i in infos]   # which frames hold the bytes
    return {f"{phase}_cached_mem_mb": sum(i.memSize() for i in infos) / 2**20,
            f"{phase}_cached_disk_mb": sum(i.diskSize() for i in infos) / 2**20, f"{phase}_cached_rdds": rdds,
            f"{phase}_local_dirs_mb": local_dirs_mb(sc)}


def local_dirs_mb(sc) -> float:
    """MiB of files in the driver's block-manager folders now (shuffle files, evicted blocks), read on disk.

    Spark's storage report (the `cached` figures) counts an evicted block again each time a task reads
    it (docs/history/benchmarks-notebook.md, "The 27 GB were Spark's count, not the disk"); this is
    what the disk holds. On a cluster it covers the driver's folders only.
    """
    dirs = sc._jvm.org.apache.spark.SparkEnv.get().blockManager().diskBlockManager().localDirs()
    total = 0
    for d in dirs:
        for f in Path(d.getPath()).rglob("*"):
            try:
                total += f.stat().st_size if f.is_file() else 0
            except FileNotFoundError:   # a file Spark deleted while we walked
                pass
    return total / 2**20


def task_bytes(evlog_dir: str, app: str) -> dict[str, dict[str, int]]:
    """Per job group: shuffle bytes written and bytes spilled (memory + disk), from one event-log read."""
    stage_group, out = {}, {}
    path = next(Path(evlog_dir).glob(f"*{app}*"))   # Spark 4 writes a folder of rolled files
    files = sorted(path.glob("events_*")) if path.is_dir() else [path]
    lines = (line for f in files for line in open(f))
    for line in lines:
        ev = json.loads(line)
        kind = ev.get("Event")
        if kind == "SparkListenerJobStart":
            group = (ev.get("Properties") or {}).get("spark.jobGroup.id", "other")
            for s in ev.get("Stage IDs", []):
                stage_group[s] = group
        elif kind == "SparkListenerTaskEnd":
            m = ev.get("Task Metrics") or {}
            g = out.setdefault(stage_group.get(ev.get("Stage ID"), "other"), {"shuffle": 0, "spilled": 0})
            g["shuffle"] += int((m.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0))
            g["spilled"] += int(m.get("Memory Bytes Spilled", 0)) + int(m.get("Disk Bytes Spilled", 0))
    return out


def point(n: int, mode: str, lookups: int, evlog: str, checks: list[str]) -> dict:
    master = "spark://127.0.0.1:7077" if mode == "standalone" else mode
    cmd = [str(ROOT / ".venv/bin/spark-submit"), "--master", master,
           "--driver-memory", os.environ.get("SCRIBE_DRIVER_MEMORY", "8g"),
           "--conf", "spark.sql.shuffle.partitions=8", "--conf", "spark.ui.showConsoleProgress=false",
           "--driver-java-options", f"-Dlog4j.configurationFile=file:{ROOT}/conf/spark/log4j2.properties"]
    if mode == "standalone":
        # what run.sh ships with --py-files
        zip_path = subprocess.run([str(ROOT / "run.sh"), "package"], capture_output=True, text=True,
                                  check=True).stdout.strip().splitlines()[-1]
        cmd += ["--py-files", str(zip_path), "--executor-memory",
                os.environ.get("SCRIBE_EXECUTOR_MEMORY", "5g")]
    cmd += [__file__, "--child", str(n), "--lookups", str(lookups), "--evlog", evlog, *checks]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    sampler = proctree.PeakSampler(proc.pid, also=lambda c: b"CoarseGrainedExecutorBackend" in c)
    t0 = time.time()
    stdout, _ = proc.communicate()
    peak_kb = sampler.stop()
    if proc.returncode != 0:
        return {"n": n, "mode": mode, "error": f"exit {proc.returncode}", "wall_s": time.time() - t0}
    res = json.loads(next(line for line in stdout.splitlines() if line.startswith("RESULT "))[7:])
    tb = task_bytes(evlog.removeprefix("file:"), res["app"])
    res.update(mode=mode, wall_s=time.time() - t0, peak_mb=peak_kb / 1024,
               **{f"{ph}_{k}_mb": tb.get(ph, {}).get(k, 0) / 2**20
                  for ph in PHASES for k in ("shuffle", "spilled")},
               **{f"peak_{r}_mb": kb / 1024 for r, kb in sampler.role_peak_kb.items()})
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 300_000, 1_000_000])
    ap.add_argument("--modes", nargs="+", default=["local[1]", "local[2]", "standalone"])
    ap.add_argument("--lookups", type=int, default=200_000)
    ap.add_argument("--out", default=str(ROOT / "data/bench/scaling.jsonl"))
    ap.add_argument("--check-lookups", type=int, default=10_000, help="lookups to random keys checked")
    ap.add_argument("--check-topics", type=int, default=30, help="topics whose trees are checked")
    ap.add_argument("--proximity", choices=["transit-stub", "plane"], default="transit-stub")
    ap.add_argument("--child", type=int)
    ap.add_argument("--evlog")
    a = ap.parse_args()
    logging.basicConfig(format="  %(message)s", stream=sys.stderr)
    logging.getLogger("scribe_spark").setLevel(logging.INFO)   # superstep progress lines
    if a.child:
        child(a.child, a.lookups, a.evlog, a.check_lookups, a.check_topics, a.proximity)
        return
    evlog = ROOT / "data/bench/eventlog"
    evlog.mkdir(parents=True, exist_ok=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    for mode in a.modes:
        if mode == "standalone":
            # workers big enough for 5g executors (the run.sh default is 4g workers, 3g executors)
            env = {**os.environ, "SCRIBE_WORKER_MEMORY": os.environ.get("SCRIBE_WORKER_MEMORY", "6g")}
            subprocess.run([str(ROOT / "run.sh"), "cluster", "start"], check=True, env=env)
        try:
            for n in a.sizes:
                checks = ["--check-lookups", str(a.check_lookups), "--check-topics", str(a.check_topics),
                          "--proximity", a.proximity]
                r = point(n, mode, a.lookups, f"file:{evlog}", checks)
                print(json.dumps(r), flush=True)
                with open(a.out, "a") as f:
                    f.write(json.dumps(r) + "\n")
        finally:
            if mode == "standalone":
                subprocess.run([str(ROOT / "run.sh"), "cluster", "stop"])


if __name__ == "__main__":
    main()
