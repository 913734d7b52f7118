"""Benchmark: Pastry state build + routing on Spark vs a single-process NumPy reference.

    .venv/bin/python bench/pastry_bench.py 10000 100000 1000000 [--lookups 200000] [--master local[2]]
                                           [--routes 1]

For each N it runs, in separate child processes (so peak memory is measured cleanly):
  spark      build the converged state with mapInArrow and route all lookups as supersteps;
             peak memory = summed RSS of the whole process tree (driver, JVM, Python workers)
  reference  the same numpy kernels called directly in one process on dense arrays,
             routing all lookups hop by hop without Spark; peak memory = ru_maxrss
and prints one table row per (N, implementation). Both use seed 1, the plane model,
b=4, |L|=16, |M|=32, proximity neighbor selection, and the same lookups. With `--routes K` each
implementation routes the same lookups K times in its process; the row gives the first time and,
after a slash, the least of the others (a warm Spark session: its plans, Python workers and
broadcast ring already made). Both deliver a lookup in the step whose leaf-set hop reaches its
node, and a table hop's node takes its leaf-set hop in the same step when the key is in its leaf
set's range, as `overlay.route` does on a converged state. Earlier routes' delivered frames are not
released, so with K > 1 the peak memory includes them. Both compute what a route delivers for each
lookup (node, hops, distance, direct distance, rare-case hops); the last column is a SHA-1 of those
rows in lookup order, and the script exits non-zero when the two implementations' digests differ.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import proctree  # noqa: E402  (bench/ is the script's folder)


def _ring(n: int):
    from scribe_spark import ids, topology
    from scribe_spark.pastry.kernels import Ring
    rng = np.random.default_rng([1, n])
    hi, lo = ids.random_ids(n, rng)
    return Ring(hi, lo, 4, 16, 32, topology.plane(n, rng))


def _lookups(ring, count: int):
    rng = np.random.default_rng([1, ring.n, 1])
    src = rng.integers(0, ring.n, size=count)
    dst = (src + rng.integers(1, ring.n, size=count)) % ring.n
    return src, dst


def run_spark(n: int, lookups: int, master: str, routes: int = 1) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sampler = proctree.PeakSampler(os.getpid())
    from pyspark.sql import SparkSession

    from scribe_spark.pastry import overlay as ov
    from scribe_spark.spark.session import SESSION_CONF
    spark = (SparkSession.builder.master(master).config(map=SESSION_CONF).config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "12g").config("spark.sql.shuffle.partitions", "8")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    ring = _ring(n)
    t0 = time.time()
    o = ov.build_overlay(spark, ring, "proximity", seed=1)
    t_build = time.time() - t0
    src, dst = _lookups(ring, lookups)
    msgs = ov.messages_frame(spark, src, ring.hi[dst], ring.lo[dst])
    times = []
    for _ in range(routes):
        t1 = time.time()
        routed = ov.route(o, msgs)
        agg = routed.agg({"hops": "sum", "*": "count"}).first()
        times.append(time.time() - t1)
    peak_kb = sampler.stop()
    hops = int(agg["sum(hops)"])
    rows = routed.select("mid", *DELIVERED).toPandas().sort_values("mid")   # after the timing
    digest = _digest(*(rows[c].to_numpy() for c in DELIVERED))
    spark.stop()
    return {"impl": f"spark {master}", "n": n, "build_s": t_build, "route_s": times, "hops": hops,
            "lookups": int(agg["count(1)"]), "peak_mb": peak_kb / 1024, "digest": digest}


DELIVERED = ("dest", "hops", "distance", "direct", "rare")   # what a route delivers for each lookup


def _digest(dest, hops, distance, direct, rare) -> str:
    """Return a short SHA-1 of the delivered rows (in lookup order), as both implementations compute it."""
    h = hashlib.sha1()
    for values, dtype in ((dest, np.int64), (hops, np.int64), (distance, np.float64), (direct, np.float64),
                          (rare, np.int64)):
        h.update(np.ascontiguousarray(values, dtype=dtype).tobytes())
    return h.hexdigest()[:12]


def run_reference(n: int, lookups: int, routes: int = 1) -> dict:
    from scribe_spark.pastry import kernels
    ring = _ring(n)
    nodes = np.arange(n)
    t0 = time.time()
    leaf = np.array(kernels.leaf_sets(ring, nodes))                       # (N, L)
    nbr = kernels.neighborhood_sets(ring, nodes)
    rt = kernels.routing_tables(ring, nodes, "proximity", 1)
    width = max(len(r) for r in rt)
    rt_dense = np.full((n, width), -1, dtype=np.int64)
    for i, r in enumerate(rt):
        rt_dense[i, :len(r)] = r
    rt_len = np.array([len(r) for r in rt])
    nbr_dense = np.array([np.pad(x, (0, ring.neighborhood - len(x)), constant_values=-1) for x in nbr])
    t_build = time.time() - t0
    src, dst = _lookups(ring, lookups)
    khi, klo = ring.hi[dst], ring.lo[dst]
    times = []
    for _ in range(routes):
        t1 = time.time()
        at, hops, dist, rare = _route_reference(ring, src, khi, klo, leaf, rt_dense, rt_len, nbr_dense)
        direct = ring.prox.dist(src, at)
        times.append(time.time() - t1)
    assert (at == dst).all(), "reference routing delivered a lookup to the wrong node"
    return {"impl": "numpy reference", "n": n, "build_s": t_build, "route_s": times,
            "hops": int(hops.sum()),
            "lookups": lookups, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "digest": _digest(at, hops, dist, direct, rare)}


def _route_reference(ring, src, khi, klo, leaf, rt_dense, rt_len, nbr_dense) -> tuple:
    """Route every lookup hop by hop on the dense state; return final nodes, hops, distances and rare hops.

    The distance adds each hop's proximity distance in the order `overlay.route` adds them.
    """
    from scribe_spark.pastry import kernels
    width = rt_dense.shape[1]
    at, hops = src.copy(), np.zeros(len(src), dtype=np.int64)
    dist, rare = np.zeros(len(src)), np.zeros(len(src), dtype=np.int64)
    active = np.arange(len(src))
    while len(active):
        a = at[active]
        k = len(a)
        leaf_offs = np.arange(k + 1) * leaf.shape[1]
        rt_offs = np.concatenate([[0], np.cumsum(rt_len[a])])
        rt_vals = rt_dense[a][np.arange(width)[None, :] < rt_len[a][:, None]]
        nv = nbr_dense[a]
        nbr_vals = nv[nv >= 0]
        nbr_offs = np.concatenate([[0], np.cumsum((nv >= 0).sum(1))])
        nxt, rule = kernels.route_step(ring, khi[active], klo[active], a, leaf[a].ravel(), leaf_offs,
                                       rt_vals, rt_offs, nbr_vals, nbr_offs)
        moving = rule != kernels.DELIVERED
        moved = active[moving]
        dist[moved] += ring.prox.dist(a[moving], nxt[moving])
        rare[active] += rule == kernels.RARE
        at[moved] = nxt[moving]
        hops[moved] += 1
        # as `overlay.route` on a converged state: a leaf-set hop reaches the closest node, which delivers,
        # and a table hop's node takes its leaf-set step in the same step when the key is in range
        active = active[moving & (rule != kernels.LEAF)]
        if not kernels.whole_ring(ring, ring.n):   # (on a smaller ring every first hop is a leaf-set hop)
            taken, final = kernels.leaf_rule(ring, khi[active], klo[active], at[active], leaf[at[active]])
            go, final = active[taken], final[taken]
            hops[go] += final != at[go]
            dist[go] += ring.prox.dist(at[go], final)
            at[go] = final
            active = active[~taken]
    return at, hops, dist, rare


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("nodes", nargs="*", type=int, default=[10_000, 100_000])
    ap.add_argument("--lookups", type=int, default=200_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--only", choices=["spark", "reference"])
    ap.add_argument("--routes", type=int, default=1, help="route the lookups this many times per process")
    ap.add_argument("--child", choices=["spark", "reference"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.routes < 1:
        ap.error(f"--routes: must be at least 1 (got {args.routes})")
    logging.basicConfig(format="  %(message)s", stream=sys.stderr)
    logging.getLogger("scribe_spark").setLevel(logging.INFO)   # superstep progress lines
    if args.child:
        n = args.nodes[0]
        if args.child == "spark":
            res = run_spark(n, args.lookups, args.master, args.routes)
        else:
            res = run_reference(n, args.lookups, args.routes)
        print("RESULT " + json.dumps(res), flush=True)
        return
    print("| N | implementation | state build s | routing s | lookups | mean hops | lookup-hops/s "
          "| peak memory MB | delivered rows (SHA-1) |")
    print("|---|---|---|---|---|---|---|---|---|")
    differ = []
    for n in args.nodes:
        digests = set()
        for impl in ("spark", "reference"):
            if args.only and impl != args.only:
                continue
            t = time.time()
            out = subprocess.run([sys.executable, __file__, str(n), "--lookups", str(args.lookups),
                                  "--master", args.master, "--routes", str(args.routes), "--child", impl],
                                 capture_output=True, text=True)
            lines = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
            if not lines:
                last = out.stderr.strip().splitlines()[-1:]
                print(f"| {n:,} | {impl} | failed after {time.time() - t:.0f}s: {last} |")
                continue
            r = json.loads(lines[0][7:])
            first, rest = r["route_s"][0], r["route_s"][1:]
            shown = f"{first:.1f}" + (f" / {min(rest):.1f}" if rest else "")
            print(f"| {n:,} | {r['impl']} | {r['build_s']:.1f} | {shown} | {r['lookups']:,} | "
                  f"{r['hops'] / r['lookups']:.3f} | {r['hops'] / min(r['route_s']):,.0f} | "
                  f"{r['peak_mb']:,.0f} | {r['digest']} |",
                  flush=True)
            digests.add(r["digest"])
        if len(digests) > 1:
            differ.append(n)
    if differ:
        sys.exit(f"the implementations delivered different rows at N = {', '.join(f'{n:,}' for n in differ)}")


if __name__ == "__main__":
    main()
