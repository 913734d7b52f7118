"""Check a scribe_multicast run's IP multicast link stress against a per-topic walk in one process.

    .venv/bin/python bench/check_ip_link_stress.py RUN_FOLDER [--conf FILE] [--set k=v ...]

RUN_FOLDER is the job's folder of a run made with `save_trees = true` (it reads trees.parquet,
subscriptions.parquet and nodes.parquet); the conf and --set values must be the run's, so that
the same transit-stub network is built. For each topic, the root is the tree node without a
parent; the links on the shortest router paths from the root's router to its members' routers
are counted once per topic. The job writes copies per link only as a distribution
(link_stress_distribution.csv), so that is what is compared, with the total. Exits 1 on a difference.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scribe_spark import config, loader, topology  # noqa: E402
from scribe_spark.workloads.network import shared_network  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--conf", type=Path, default=ROOT / "conf" / "scribe_multicast.toml")
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    args = ap.parse_args()
    p = loader.load(config.ScribeParams, args.conf, args.overrides)
    if p.proximity != "transit-stub":
        sys.exit(f"check_ip_link_stress: proximity = {p.proximity!r} has no router links to check")
    routers, _ = shared_network(p, p.seed)
    trees = pq.read_table(args.run / "trees.parquet").to_pandas()
    subs = pq.read_table(args.run / "subscriptions.parquet").to_pandas()
    router = pq.read_table(args.run / "nodes.parquet").to_pandas().set_index("id").router
    roots = dict(set(zip(trees.topic, trees.parent)) - set(zip(trees.topic, trees.child)))
    want = np.zeros(len(routers.edges), dtype=np.int64)
    pred, li = routers.pred, routers.link_index()
    for topic, group in subs.groupby("topic"):
        if topic not in roots:      # a one-member topic whose member is the root: no links
            continue
        a = np.full(len(group), router[roots[topic]], dtype=np.int64)
        _, link = topology.path_links(pred, li, a, router[group.node].to_numpy().astype(np.int64))
        want[np.unique(link)] += 1
    dist = pd.read_csv(args.run / "link_stress_distribution.csv")
    ip = dist[dist.scheme == "ip_multicast"]
    total = int((ip.copies * ip.links).sum())
    print(f"IP multicast copies: job {total:,}, per-topic walk {int(want.sum()):,}")
    vals, cnt = np.unique(want[want > 0], return_counts=True)
    got_hist = dict(zip(ip.copies, ip.links))
    same = (total == want.sum() and len(vals) == len(ip)
            and all(got_hist.get(v) == c for v, c in zip(vals, cnt)))
    print("same distribution of copies per link" if same else "DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
