"""Scribe trees as TNO's event notification service: per-event delays with per-hop jitter."""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import sparse


class ScribeENS:
    """Per-event delays over the Scribe trees with independent per-hop jitter."""

    def __init__(self, edges: pd.DataFrame, roots: dict, pub_to_root: np.ndarray, edge_delay: np.ndarray,
                 jitter: float):
        self.jitter = jitter
        self.pub_to_root = pub_to_root          # (clients, topics) ms
        self.paths = {}
        # one tree hop up, per (topic, node): what a recovery request to the Scribe parent crosses
        self.up = {(int(t), int(n)): float(d) for t, n, d in zip(edges.topic, edges.src, edge_delay)}
        self.typical_hop = float(np.median(edge_delay)) if len(edge_delay) else 0.0
        for topic, e in edges.assign(delay=edge_delay).groupby("topic"):
            parent = dict(zip(e.src, e.dst))
            index = {(c, p): k for k, (c, p) in enumerate(zip(e.src, e.dst))}
            nodes = sorted(set(e.src) | {roots[topic]})
            rows, cols = [], []
            for i, n in enumerate(nodes):
                while n in parent:
                    rows.append(i)
                    cols.append(index[(n, parent[n])])
                    n = parent[n]
            m = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(nodes), len(e)))
            self.paths[topic] = ({n: i for i, n in enumerate(nodes)}, m, e.delay.to_numpy())

    def __call__(self, client, topic, receivers, rng):
        row_of, m, base = self.paths.get(topic, ({}, None, None))

        def j(k: int) -> np.ndarray:
            return 1.0 + self.jitter * rng.uniform(-1.0, 1.0, k)

        to_root = self.pub_to_root[client, topic] * j(1)[0]
        if m is None:
            return np.full(len(receivers), to_root)
        down = m @ (base * j(len(base)))
        return to_root + np.array([down[row_of[r]] if r in row_of else 0.0 for r in receivers])

    def rtt(self, topic: int, node: int) -> float:
        """Round trip to `node`'s parent in the topic's tree (the root, with no parent: a typical hop)."""
        return 2.0 * self.up.get((topic, node), self.typical_hop)
