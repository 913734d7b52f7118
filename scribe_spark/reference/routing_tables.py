"""Routing tables grown by joins against the converged construction's."""
from __future__ import annotations

import numpy as np
import pandas as pd

from scribe_spark import ids
from scribe_spark.pastry.kernels import Ring

QUALITY = ("empty", "optimal", "suboptimal")   # row_quality's classes of a slot the converged table fills


def compare_tables(ring: Ring, grown: pd.DataFrame, converged: pd.DataFrame) -> dict:
    """Compare routing tables grown by joins with the converged construction's (both indexed by id).

    Returns entries (slots the converged construction fills), best (of those, how many hold the
    same, proximity-best node), invalid (grown entries that break the prefix/digit rule) and
    best_share = best / entries.
    """
    cols = 1 << ring.b
    best = entries = invalid = 0
    for node, rt in grown.rt.items():
        rt, conv = np.asarray(rt), np.asarray(converged.rt[node])
        slot = np.flatnonzero(rt >= 0)
        e, r = rt[slot], slot // cols
        pre = ids.shared_prefix_digits(ring.hi[e], ring.lo[e], np.full(len(e), ring.hi[node]),
                                       np.full(len(e), ring.lo[node]), ring.b)
        invalid += int(((pre != r) | (ids.digit(ring.hi[e], ring.lo[e], r, ring.b) != slot % cols)).sum())
        entries += int((conv >= 0).sum())   # every slot it fills, also in rows the grown table lacks
        m = min(len(rt), len(conv))
        filled = conv[:m] >= 0
        best += int((rt[:m][filled] == conv[:m][filled]).sum())
    return {"entries": entries, "best": best, "invalid": invalid, "best_share": best / max(1, entries)}


def row_quality(ring: Ring, grown: pd.DataFrame, converged: pd.DataFrame) -> pd.DataFrame:
    """Per routing-table row, of the slots the converged construction fills: empty, optimal, sub-optimal.

    Optimal means the grown entry is the converged construction's (the proximity-best valid
    node); sub-optimal means another node. Both frames are indexed by id with an `rt` column.
    """
    cols = 1 << ring.b
    counts: dict[int, list[int]] = {}
    for node, rt in grown.rt.items():
        rt, conv = np.asarray(rt), np.asarray(converged.rt[node])
        got = np.full(len(conv), -1, dtype=np.int64)
        got[:min(len(rt), len(conv))] = rt[:len(conv)]
        for slot in np.flatnonzero(conv >= 0):
            c = counts.setdefault(int(slot // cols), [0, 0, 0])
            c[0 if got[slot] < 0 else 1 if got[slot] == conv[slot] else 2] += 1
    rows = sorted(counts)
    return pd.DataFrame({"row": rows, **{q: [counts[r][i] for r in rows] for i, q in enumerate(QUALITY)}})
