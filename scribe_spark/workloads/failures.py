"""Failure schedules: which nodes fail."""
from __future__ import annotations

import numpy as np

from scribe_spark.config import ScribeRepairParams


def choose_failures(p: ScribeRepairParams, roots: np.ndarray, rng: np.random.Generator):
    """Return (dead mask, publisher per topic): `failed_roots` topics' roots fail, publishers never do."""
    dead = np.zeros(p.nodes, dtype=bool)
    dead[roots[rng.choice(p.topics, p.failed_roots, replace=False)]] = True
    publisher = rng.choice(np.flatnonzero(~dead), p.topics)
    spare = np.setdiff1d(np.flatnonzero(~dead), publisher)
    more = round(p.fail_fraction * p.nodes) - int(dead.sum())
    if more > len(spare):
        raise RuntimeError(f"cannot fail {more} more nodes besides the {p.topics} "
                           "publishers")  # config forbids it
    dead[rng.choice(spare, max(0, more), replace=False)] = True
    return dead, publisher
