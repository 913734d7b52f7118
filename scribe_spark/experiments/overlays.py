"""The overlay an experiment routes on: the converged construction or one grown by Pastry's joins."""
from __future__ import annotations

import time
from typing import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession

from scribe_spark import ids
from scribe_spark.config import Growth
from scribe_spark.experiments.run import Run
from scribe_spark.pastry import joins
from scribe_spark.pastry import overlay as ov
from scribe_spark.pastry.kernels import Ring
from scribe_spark.streams import Purpose, stream
from scribe_spark.workloads.network import RING_BLOCK


def build(spark: SparkSession, ring: Ring, p: Growth, run: Run, mode: str = "proximity",
          partitions: int | None = None) -> ov.Overlay:
    """Build the overlay `p.overlay` names; joins apply to proximity neighbour selection only."""
    seed = p.seed   # type: ignore[attr-defined]
    if p.overlay == "converged" or mode != "proximity":
        return ov.build_overlay(spark, ring, mode, seed=seed, partitions=partitions)
    t0 = time.time()
    order = stream(seed, Purpose.GROWTH, ring.n)   # apart from the workload's streams
    overlay, counts = joins.grow(spark, ring, p.join_initial, p.join_batch, order, p.join_improve)
    messages = sum(counts.values())
    run.log(f"{ring.n:,} nodes joined from {p.join_initial:,} in batches of {p.join_batch:,} "
            f"(second phase: {p.join_improve}), {messages / (ring.n - p.join_initial):.1f} messages per "
            f"newcomer ({time.time() - t0:.1f}s)")
    return overlay


def described(p: Growth) -> str:
    """A sentence for the summary when the overlay was grown by joins ('' for the converged one)."""
    if p.overlay == "converged":
        return ""
    return (f"The overlay was grown by Pastry's join protocol: {p.join_initial:,} nodes start converged, the "
            f"others join in batches of {p.join_batch:,} concurrent joins, second join phase "
            f"`{p.join_improve}` (proximity neighbour selection only).\n")


def node_tables(ring: Ring, site: str = "site", numbered: bool = False, **fixed: int) -> Iterator[pa.Table]:
    """The nodes' ids and placements for an output file, a ring block at a time: `fixed` columns (one value
    each) first, then the node numbers if `numbered`, the id and where the node sits."""
    place = ring.prox.placement(site)
    for a in range(0, ring.n, RING_BLOCK):
        b = min(a + RING_BLOCK, ring.n)
        cols = {k: np.full(b - a, v) for k, v in fixed.items()}
        if numbered:
            cols["node"] = np.arange(a, b)
        cols["id"] = ids.to_hex(ring.hi[a:b], ring.lo[a:b])
        yield pa.table({**cols, **{k: v[a:b] for k, v in place.items()}})
