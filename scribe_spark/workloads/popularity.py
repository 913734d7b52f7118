"""Topic popularity laws and subscriptions drawn from them (TNO workloads)."""
from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

# popularity models: the top `share` of topics draw 80% of the picks
POPULARITY = {"skewed": 0.005, "spread": 0.40}


def zipf_exponent(n_topics: int, top_share: float, mass: float = 0.8) -> float:
    """Return s such that the top ceil(top_share * n) ranks hold `mass` of Zipf(s) over n ranks."""
    k = max(1, int(np.ceil(top_share * n_topics)))
    r = np.arange(1, n_topics + 1, dtype=np.float64)

    def excess(s: float) -> float:
        w = r ** -s
        return w[:k].sum() / w.sum() - mass
    if excess(0.0) >= 0:
        return 0.0
    return float(brentq(excess, 0.0, 50.0, xtol=1e-10))


def popularity(n_topics: int, model: str) -> np.ndarray:
    """Return publication/pick probabilities of topics by rank (rank 0 most popular)."""
    s = zipf_exponent(n_topics, POPULARITY[model])
    w = np.arange(1, n_topics + 1, dtype=np.float64) ** -s
    return w / w.sum()


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
