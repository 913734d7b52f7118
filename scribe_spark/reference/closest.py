"""Brute force: the numerically closest live node to a key, and lookups checked against it."""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from scribe_spark import ids
from scribe_spark.pastry.kernels import Ring
from scribe_spark.pastry.overlay import Overlay, messages_frame, route

_log = logging.getLogger(__name__)


def closest_live(ring: Ring, alive: np.ndarray, khi: np.ndarray, klo: np.ndarray) -> np.ndarray:
    """Return the numerically closest live node to each key (brute force over the sorted live ids)."""
    order = ring.order[alive[ring.order]]
    shi, slo = ring.hi[order], ring.lo[order]
    i = ids.searchsorted(shi, slo, khi, klo)
    succ, pred = order[i % len(order)], order[(i - 1) % len(order)]
    return np.where(ids.closer(ring.hi[succ], ring.lo[succ], ring.hi[pred], ring.lo[pred], khi, klo), succ,
                    pred)


def checked_lookups(overlay: Overlay, src: np.ndarray, khi: np.ndarray, klo: np.ndarray, alive: np.ndarray,
                    **route_args) -> pd.DataFrame:
    """Route lookups from `src` to the keys; return them in order, `correct` = ended at the closest live node.

    `route_args` go to `overlay.route` (dead, repair)."""
    msgs = messages_frame(overlay.state.sparkSession, src, khi, klo)
    routed = route(overlay, msgs, **route_args).toPandas().sort_values("mid")
    routed["correct"] = routed.dest.to_numpy() == closest_live(overlay.ring, alive, khi, klo)
    return routed
