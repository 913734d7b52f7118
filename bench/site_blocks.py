"""Count the delay-block entries the transit-stub proximity search touches in rows 0 and 1.

    .venv/bin/python bench/site_blocks.py

For the scaling bench's rings (S1 workload, seed 1) at 100k, 300k and 1M nodes: per random
20,000-node chunk (the state build's batch), each (parent class, digit) search reads a
[query sites x candidate sites] block of the site delay matrix (`topology.Proximity.nearest`).
This explains why the build grows faster than N there (docs/history/benchmarks-notebook.md, "Scaling with N").
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np

from scribe_spark import ids
from scribe_spark.config import ScribeParams
from scribe_spark.workloads.network import make_ring, shared_network

p = ScribeParams()
routers, _ = shared_network(p, p.seed)
for n in (100_000, 300_000, 1_000_000):
    ring = make_ring(n, p, p.seed, routers)
    site = ring.prox.site
    # digits of each node in ring order
    d0 = ids.digit(ring.shi, ring.slo, 0, 4)
    d1 = ids.digit(ring.shi, ring.slo, 1, 4)
    cls0 = d0
    cls1 = d0 * 16 + d1
    csites1 = np.array([len(np.unique(site[ring.order[cls1 == c]])) for c in range(256)])
    csites0 = np.array([len(np.unique(site[ring.order[cls0 == c]])) for c in range(16)])
    rng = np.random.default_rng(0)
    perm = rng.permutation(n)
    total0 = total1 = 0
    for a in range(0, n, 20_000):
        q = perm[a:a + 20_000]
        qpos = ring.pos[q]
        qs0 = len(np.unique(site[q]))
        total0 += qs0 * csites0.sum()            # one group (whole ring), 16 digits (minus own: ignore)
        g = d0[qpos]
        for gg in range(16):
            qq = q[g == gg]
            qs = len(np.unique(site[qq]))
            sz = np.array([(cls1 == gg * 16 + c).sum() for c in range(16)])
            if (sz.sum()) > 256:   # parent class (row-1 bounds) big enough for the per-site path
                total1 += qs * csites1[gg * 16:(gg + 1) * 16].sum()
    print(n, f"row0 {total0/1e9:.1f}G row1 {total1/1e9:.1f}G total {(total0+total1)/1e9:.1f}G; "
          f"mean candidate sites row1 {csites1.mean():.0f}")
