"""Sequencing-group sizes in one process with SciPy: the reference the Spark self-join is checked against."""
from __future__ import annotations

import numpy as np
from scipy import sparse


def group_sizes(subscriber: np.ndarray, topic: np.ndarray, n_topics: int, causal: bool = False) -> np.ndarray:
    """Return |SG_T| for T in 0..n_topics-1 from one sparse product A^T A (0 for topics nobody holds).

    SG_T holds T and every topic sharing at least two subscribers with T (one with `causal`).
    """
    _, row = np.unique(subscriber, return_inverse=True)
    incidence = sparse.csr_matrix((np.ones(len(row), dtype=np.int32), (row, topic)),
                                  shape=(int(row.max()) + 1, n_topics))
    incidence.data[:] = 1   # a subscription given twice counts once
    shared = (incidence.T @ incidence).tocsr()
    present = shared.diagonal() > 0
    shared.setdiag(0)
    shared.eliminate_zeros()
    need = 1 if causal else 2
    return np.where(present, 1 + np.asarray((shared >= need).sum(axis=1)).ravel(), 0)
