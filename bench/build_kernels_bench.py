"""State build kernels per batch: this tree against an older one, same rings, same output.

    .venv/bin/python bench/build_kernels_bench.py [--sizes 300000 1000000 2000000] [--chunk 20000]
                                                  [--chunks 3] [--baseline DIR] [--ring-ranges]
                                                  [--proximity transit-stub|plane]

For the S1 rings (transit-stub network of 5,050 routers, or with `--proximity plane` the plane
model; b=4, |L|=16, |M|=32, seed 1) it builds
the routing tables and neighborhood sets of `chunks` random batches of `chunk` nodes (a state-build
batch, as one Python worker sees them one after the other; with `--ring-ranges` consecutive ring
positions, as the build's tasks take them) and reports seconds per batch, and of them the
neighborhood sets' seconds. With
`--baseline DIR` (e.g. a `git worktree` of an older commit) the same measurement runs on that
tree in its own process, and the two trees' tables and sets are compared entry for entry (by
digest). Each measurement is a separate child process, so nothing is cached between them.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(tree: str, n: int, chunk: int, chunks: int, ring_ranges: bool, proximity: str) -> None:
    """Measure in this process with `tree` first on sys.path; print one JSON line."""
    sys.path.insert(0, tree)
    import numpy as np

    from scribe_spark.config import AnyProximity, ScribeParams
    from scribe_spark.pastry import kernels
    from scribe_spark.workloads.network import make_ring, shared_network
    p = ScribeParams()
    model = AnyProximity(proximity=proximity, b=p.b, leaf_set=p.leaf_set, neighborhood=p.neighborhood,
                         topology=p.topology)    # S1's Pastry keys; the plane model has no routers
    routers, _ = shared_network(model, p.seed)
    ring = make_ring(n, model, p.seed, routers)
    perm = np.random.default_rng(0).permutation(n)
    digest, seconds, nbr_seconds = hashlib.sha256(), [], []
    for k in range(chunks):
        batch = slice(k * chunk, (k + 1) * chunk)
        nodes = ring.order[batch] if ring_ranges else np.sort(perm[batch])
        t0 = time.perf_counter()
        rt = kernels.routing_tables(ring, nodes, "proximity", 1)
        t1 = time.perf_counter()
        nbr = kernels.neighborhood_sets(ring, nodes)
        seconds.append(time.perf_counter() - t0)
        nbr_seconds.append(time.perf_counter() - t1)
        for a in rt + nbr:
            digest.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
            digest.update(b"|")
    print(json.dumps({"seconds": seconds, "nbr_seconds": nbr_seconds, "digest": digest.hexdigest()}))


def measure(tree: Path, n: int, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", str(tree), "--sizes", str(n), "--chunk", str(args.chunk),
           "--chunks", str(args.chunks), "--proximity", args.proximity]
    cmd += ["--ring-ranges"] if args.ring_ranges else []
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[300_000, 1_000_000, 2_000_000])
    ap.add_argument("--chunk", type=int, default=20_000)
    ap.add_argument("--chunks", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="an older source tree to compare with")
    ap.add_argument("--ring-ranges", action="store_true", help="batches of consecutive ring positions")
    ap.add_argument("--proximity", choices=["transit-stub", "plane"], default="transit-stub")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.sizes[0], args.chunk, args.chunks, args.ring_ranges, args.proximity)
    trees = [("this tree", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(f"| N | tree | seconds per batch of {args.chunk:,} (batch 1, 2, ...) | mean of batches 2+ "
          "| of which neighborhood sets |")
    print("|---|---|---|---|---|")
    for n in args.sizes:
        got = {}
        for name, tree in trees:
            got[name] = r = measure(tree, n, args)
            later, nbr = r["seconds"][1:] or r["seconds"], r["nbr_seconds"][1:] or r["nbr_seconds"]
            print(f"| {n:,} | {name} | {', '.join(f'{s:.1f}' for s in r['seconds'])} | "
                  f"{sum(later) / len(later):.2f} | {sum(nbr) / len(nbr):.2f} |", flush=True)
        if args.baseline and got["this tree"]["digest"] != got["baseline"]["digest"]:
            print(f"N={n:,}: tables or sets differ from the baseline's", file=sys.stderr)
            sys.exit(1)
    if args.baseline:
        print("tables and sets identical to the baseline's at every size")


if __name__ == "__main__":
    main()
