"""Subscriptions drawn from topic popularity laws (TNO workloads); the laws themselves are in `laws`."""
from __future__ import annotations

import numpy as np

from scribe_spark.laws import popularity


def site_ranks(site_topics: list[list[int]]) -> np.ndarray:
    """Return rank[site, topic] (0 = most popular) as seen from each site: the site's own topics
    first in their order, then the other sites' topics interleaved by their place in their
    site's list, nearer site numbers (s + 1, s + 2, ... modulo the sites) first."""
    sites, n = len(site_topics), sum(len(t) for t in site_topics)
    rank = np.empty((sites, n), dtype=np.int64)
    for s in range(sites):
        order = list(site_topics[s])
        others = [site_topics[(s + d) % sites] for d in range(1, sites)]
        for j in range(max((len(t) for t in site_topics), default=0)):
            order += [t[j] for t in others if j < len(t)]
        rank[s, order] = np.arange(n)
    return rank


def site_popularity(site_topics: list[list[int]], model: str) -> np.ndarray:
    """Return probs[site, topic]: the model's law over each site's own ranking (`site_ranks`)."""
    n = sum(len(t) for t in site_topics)
    return popularity(n, model)[site_ranks(site_topics)]


def draw_subscriptions(clients: int, per_client: int, p: np.ndarray, rng: np.random.Generator):
    """Return (subscriber, topic): each client picks `per_client` distinct topics by popularity."""
    # Efraimidis-Spirakis: the per_client largest u^(1/p) are a weighted sample without replacement
    n = len(p)
    sub, top = [], []
    block = max(1, 2_000_000 // n)
    for start in range(0, clients, block):
        m = min(block, clients - start)
        keys = np.log(rng.random((m, n))) / p[None, :]
        pick = np.argpartition(-keys, per_client - 1, axis=1)[:, :per_client]
        sub.append(np.repeat(np.arange(start, start + m), per_client))
        top.append(pick.ravel())
    return np.concatenate(sub).astype(np.int64), np.concatenate(top).astype(np.int64)
