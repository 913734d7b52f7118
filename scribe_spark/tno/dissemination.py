"""Event dissemination over the Scribe trees, with per-hop delay jitter drawn by key.

An event published by a client on a topic goes to the topic's root (the Pastry route's delay)
and down the tree; each hop's physical delay is multiplied by 1 + jitter * U(-1, 1). The draws
are keyed by (event, topic, node the hop ends at) — not taken from a stream — so that one
process (`scribe_ens.ScribeENS`, called by the discrete-event simulation) and the Spark supersteps
(`disseminate`) compute the same delays, bit for bit: both add, hop by hop from the root,
`delay + edge_delay * (1 + jitter * u)` in NumPy.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from scribe_spark.columns import DST, NODE, SRC, TOPIC
from scribe_spark.scribe.trees import multicast
from scribe_spark.spark.arrow import local_frame

ROOT_HOP = -1        # the node key of the publisher -> root hop
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_GOLDEN, _MASK = 0x9E3779B97F4A7C15, 2**64 - 1


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64 arrays (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def keyed_uniform(key: int, *cols) -> np.ndarray:
    """Return U[0, 1) draws, one per row of the integer columns, a function of (key, row) only."""
    cols = [np.asarray(c, dtype=np.int64).view(np.uint64) for c in np.broadcast_arrays(*cols)]
    h = np.full(cols[0].shape, np.uint64(key & _MASK), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in cols:
            h = _mix(h ^ _mix(c + np.uint64(_GOLDEN)))
    return (h >> np.uint64(11)).astype(np.float64) * 2.0**-53


def keyed_uniform_one(key: int, *ints: int) -> float:
    """`keyed_uniform` for one row of Python ints: the same draw, bit for bit, without NumPy's
    per-call cost (for draws made one at a time)."""
    h = key & _MASK
    for c in ints:
        h = _mix_one(h ^ _mix_one((c + _GOLDEN) & _MASK))
    return (h >> 11) * 2.0**-53


def _mix_one(z: int) -> int:
    """`_mix` on one Python int in [0, 2^64)."""
    z = ((z ^ (z >> 30)) * int(_M1)) & _MASK
    z = ((z ^ (z >> 27)) * int(_M2)) & _MASK
    return z ^ (z >> 31)


def hop(delay: np.ndarray, edge_delay: np.ndarray, jitter: float, key: int, eid, topic,
        node) -> np.ndarray:
    """Delay after one more hop: what both the single process and the supersteps compute."""
    u = keyed_uniform(key, eid, topic, node)
    return delay + edge_delay * (1.0 + jitter * (2.0 * u - 1.0))


MESSAGE_SCHEMA = T.StructType([T.StructField("eid", T.LongType(), False),
                               T.StructField(TOPIC, T.LongType(), False),
                               T.StructField(NODE, T.LongType(), False),
                               T.StructField("delay", T.DoubleType(), False)])


def _hop_task(jitter: float, key: int) -> Callable:
    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            c = {name: b.column(i).to_numpy(zero_copy_only=False) for i, name in enumerate(b.schema.names)}
            d = hop(c["delay"], c["edge_delay"], jitter, key, c["eid"], c[TOPIC], c[NODE])
            yield pa.RecordBatch.from_arrays([b.column("eid"), b.column(TOPIC), b.column(NODE), pa.array(d)],
                                             names=MESSAGE_SCHEMA.fieldNames())
    return task


def disseminate(starts: DataFrame, edges: DataFrame, jitter: float, key: int, partitions: int) -> DataFrame:
    """Return (eid, topic, node, delay) for every tree node each event reaches.

    `starts` holds (eid, topic, node = the topic's root, delay = the publisher -> root hop's);
    `edges` the trees (topic, src = child, dst = parent, edge_delay). One superstep per tree level.
    """
    def forward(at_parent: DataFrame) -> DataFrame:
        """Every node an event copy reached forwards it to each of its children."""
        return (at_parent.select("eid", TOPIC, F.col(SRC).alias(NODE), "delay", "edge_delay")
                .mapInArrow(_hop_task(jitter, key), MESSAGE_SCHEMA))

    return multicast("disseminate", starts, edges.select(TOPIC, SRC, DST, "edge_delay"), partitions, forward)


def start_frame(spark: SparkSession, eid: np.ndarray, topic: np.ndarray, root: np.ndarray,
                delay: np.ndarray) -> DataFrame:
    """Return the (eid, topic, node, delay) messages at the roots for the given publications."""
    pdf = pd.DataFrame({"eid": eid.astype(np.int64), TOPIC: topic.astype(np.int64),
                        NODE: root.astype(np.int64), "delay": delay})
    return local_frame(spark, pdf, MESSAGE_SCHEMA)

