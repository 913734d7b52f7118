"""The TNO check by direct comparison: every pair of subscribers on the events both were notified of.

Quadratic in subscribers and in common events: the oracle `tno.check` (the Spark check jobs use)
is tested against.
"""
from __future__ import annotations

from itertools import combinations

import numpy as np

from scribe_spark.tno.check import CheckResult


def _inversions(seq: np.ndarray) -> int:
    """Count pairs i < j with seq[i] > seq[j] (merge sort)."""
    def sort(a):
        if len(a) <= 1:
            return a, 0
        m = len(a) // 2
        left, x = sort(a[:m])
        right, y = sort(a[m:])
        merged, inv, i, j = [], x + y, 0, 0
        while i < len(left) and j < len(right):
            if left[i] <= right[j]:
                merged.append(left[i])
                i += 1
            else:
                merged.append(right[j])
                j += 1
                inv += len(left) - i
        merged += left[i:] + right[j:]
        return merged, inv
    return sort(list(seq))[1]


def pairwise_check(logs: dict[int, list[int]], undelivered: int = 0) -> CheckResult:
    """Compare every pair of subscribers' notification logs on the events both were notified of."""
    pos = {s: {e: i for i, e in enumerate(log)} for s, log in logs.items()}
    pairs = violating = inverted = 0
    for a, b in combinations(sorted(logs), 2):
        pairs += 1
        pb = pos[b]
        common = [e for e in logs[a] if e in pb]          # in a's order
        if len(common) < 2:
            continue
        seq = np.fromiter((pb[e] for e in common), dtype=np.int64, count=len(common))
        if (np.diff(seq) < 0).any():
            violating += 1
            inverted += _inversions(seq)
    return CheckResult(pairs, violating, inverted, undelivered)
