"""Scribe trees as TNO's event notification service, in one process: per-event delays with keyed
per-hop jitter (the same delays as `dissemination.disseminate`'s supersteps)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from scribe_spark.columns import DST, SRC, TOPIC
from scribe_spark.tno.dissemination import ROOT_HOP, hop


class ScribeENS:
    """Per-event delays from a publisher to the clients in a topic's Scribe tree.

    `edges` (topic, src = child, dst = parent) and `roots` name overlay nodes; clients are
    numbered 0.. and sit on the overlay nodes `client_nodes`; `pub_to_root` gives the Pastry
    route's delay from a client to a topic's root for every (client, topic) that publishes.
    """

    def __init__(self, edges: pd.DataFrame, edge_delay: np.ndarray, roots: dict, pub_to_root: dict,
                 client_nodes: np.ndarray, jitter: float, key: int):
        self.jitter, self.key, self.pub_to_root = jitter, key, pub_to_root
        self.client_nodes = np.asarray(client_nodes, dtype=np.int64)
        # one tree hop up, per (topic, node): what a recovery request to the Scribe parent crosses
        self.up = {(int(t), int(n)): float(d) for t, n, d in zip(edges[TOPIC], edges[SRC], edge_delay)}
        self.typical_hop = float(np.median(edge_delay)) if len(edge_delay) else 0.0
        # per topic: {node: position} and the levels below the root, each (child positions,
        # parent positions, edge delays, child nodes) — the supersteps' order
        self.levels: dict = {}
        for topic, e in edges.assign(delay=edge_delay).groupby(TOPIC):
            below: dict = {}
            for c, p, d in zip(e[SRC].to_numpy(), e[DST].to_numpy(), e.delay.to_numpy()):
                below.setdefault(int(p), []).append((int(c), float(d)))
            root = int(roots[topic])
            pos, levels, frontier = {root: 0}, [], [root]
            while frontier:
                kids = [(c, pos[p], d) for p in frontier for c, d in sorted(below.get(p, ()))]
                for c, _, _ in kids:
                    pos[c] = len(pos)
                if kids:
                    nodes = np.array([c for c, _, _ in kids], dtype=np.int64)
                    levels.append((np.array([pos[c] for c, _, _ in kids]), np.array([p for _, p, _ in kids]),
                                   np.array([d for _, _, d in kids], dtype=np.float64), nodes))
                frontier = [c for c, _, _ in kids]
            self.levels[int(topic)] = (pos, levels)

    def to_root(self, eid, client, topic) -> np.ndarray:
        """Delay of the publisher -> root hop (the Pastry route's, jittered), per row."""
        eid = np.asarray(eid, dtype=np.int64)
        route = np.fromiter((self.pub_to_root[(int(c), int(t))] for c, t in zip(client, topic)), np.float64,
                            count=len(eid))
        return hop(np.zeros(eid.shape), route, self.jitter, self.key, eid, topic, ROOT_HOP)

    def __call__(self, eid: int, client: int, topic: int, receivers: list, rng=None) -> np.ndarray:
        """Delays from `client` publishing event `eid` on `topic` to each receiving client."""
        start = self.to_root([eid], [client], [topic])[0]
        pos, levels = self.levels.get(int(topic), ({}, []))
        d = np.full(max(len(pos), 1), start)
        for child, parent, edge_delay, node in levels:
            d[child] = hop(d[parent], edge_delay, self.jitter, self.key, eid, topic, node)
        nodes = self.client_nodes[np.asarray(receivers, dtype=np.int64)].tolist()
        return np.array([d[pos[n]] if n in pos else start for n in nodes])

    def rtt(self, topic: int, client: int) -> float:
        """Round trip to the client's parent in the topic's tree (the root, with no parent: a typical hop)."""
        return 2.0 * self.up.get((topic, int(self.client_nodes[client])), self.typical_hop)
