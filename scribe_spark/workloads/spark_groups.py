"""Scribe subscriptions drawn inside Spark, chunk by chunk of node numbers, from the seed alone.

Topic t has `sizes[t]` subscribers, distinct nodes drawn uniformly from 0..N-1. The driver splits
each topic's count over chunks of `CHUNK` consecutive node numbers with a multivariate
hypergeometric draw from the topic's own stream (exactly the counts a uniform draw of distinct
nodes puts in each chunk), and a task draws each (topic, chunk)'s members from a stream of its own,
seeded with [seed, topic, chunk, MEMBERS]. So the workload does not depend on how Spark splits the
work, and the driver holds topics × chunks counts, never a subscription. Forged requests are drawn
the same way, in blocks of `CHUNK` requests.
"""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from scribe_spark.scribe.trees import NODE, TOPIC
from scribe_spark.spark.arrow import local_frame
from scribe_spark.streams import Purpose, stream

CHUNK = 1 << 20          # node numbers per chunk, and forged requests per block
ROWS_PER_TASK = 1 << 21  # about this many subscriptions are drawn by one task

_COUNTS = "topic long, chunk long, k long"
_PAIRS = f"{TOPIC} long, {NODE} long"


def chunk_widths(nodes: int, chunk: int) -> np.ndarray:
    """The number of node numbers in each chunk: `chunk` each, the last one what is left."""
    n = math.ceil(nodes / chunk)
    widths = np.full(n, chunk, dtype=np.int64)
    widths[-1] = nodes - chunk * (n - 1)
    return widths


def chunk_counts(sizes: np.ndarray, nodes: int, seed: int) -> pd.DataFrame:
    """Return (topic, chunk, k): how many of each topic's subscribers fall in each chunk (k > 0 only)."""
    widths = chunk_widths(nodes, CHUNK)
    sizes = np.asarray(sizes, dtype=np.int64)
    if len(widths) == 1:
        return pd.DataFrame({"topic": np.arange(len(sizes)), "chunk": 0, "k": sizes}).astype(np.int64)
    k = np.stack([stream(seed, Purpose.MEMBERS, t).multivariate_hypergeometric(widths, int(size))
                  for t, size in enumerate(sizes)])
    topic, chunk = np.nonzero(k)   # row-major: by topic, then chunk
    return pd.DataFrame({"topic": topic, "chunk": chunk, "k": k[topic, chunk]}).astype(np.int64)


def chunk_members(seed: int, nodes: int, topic: int, chunk: int, k: int, size: int) -> np.ndarray:
    """The k members of `topic` in its `chunk` (of `size` node numbers), in the order they are drawn."""
    width = int(chunk_widths(nodes, size)[chunk])
    drawn = stream(seed, Purpose.MEMBERS, topic, chunk).choice(width, size=k, replace=False)
    return drawn.astype(np.int64) + chunk * size


def members(spark: SparkSession, counts: pd.DataFrame, nodes: int, seed: int) -> DataFrame:
    """Return the subscriptions (topic, node) that `counts` describes, drawn by Spark tasks."""
    size = CHUNK   # read here: the tasks see this value, whatever their own module holds

    def draw(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for t, c, k in zip(*(batch.column(i).to_numpy() for i in range(3))):
                got = chunk_members(seed, nodes, int(t), int(c), int(k), size)
                yield pa.RecordBatch.from_arrays([pa.array(np.full(len(got), t, dtype=np.int64)),
                                                  pa.array(got)], names=[TOPIC, NODE])
    tasks = max(1, min(len(counts), int(counts.k.sum()) // ROWS_PER_TASK + 1))
    return local_frame(spark, counts, _COUNTS).repartition(tasks).mapInArrow(draw, _PAIRS)


def forged_requests(spark: SparkSession, count: int, topics: int, nodes: int, seed: int) -> DataFrame:
    """Return `count` (topic, node) pairs of requests with forged credentials, drawn by Spark tasks."""
    size = CHUNK
    blocks = pd.DataFrame({"block": np.arange(math.ceil(count / size), dtype=np.int64)})

    def draw(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for b in batch.column(0).to_numpy():
                rng = stream(seed, Purpose.FORGED, int(b))
                n = min(size, count - int(b) * size)
                yield pa.RecordBatch.from_arrays([pa.array(rng.integers(0, topics, n)),
                                                  pa.array(rng.integers(0, nodes, n))], names=[TOPIC, NODE])
    frame = local_frame(spark, blocks, "block long")
    return frame.repartition(max(1, len(blocks))).mapInArrow(draw, _PAIRS)


def picked_members(spark: SparkSession, counts: pd.DataFrame, nodes: int, seed: int) -> np.ndarray:
    """Return one member of each topic, picked uniformly (its index from the CREATORS stream)."""
    size = CHUNK
    counts = counts.sort_values(["topic", "chunk"], kind="stable").reset_index(drop=True)
    sizes = counts.groupby("topic").k.sum().to_numpy()
    index = stream(seed, Purpose.CREATORS, nodes).integers(0, sizes)
    before = counts.groupby("topic").k.cumsum() - counts.k          # members in the topic's earlier chunks
    i = index[counts.topic.to_numpy()] - before.to_numpy()
    hit = (i >= 0) & (i < counts.k.to_numpy())                       # the chunk that holds the index
    at = counts[hit].assign(i=i[hit])

    def pick(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            t, c, k, j = (batch.column(n).to_numpy() for n in ("topic", "chunk", "k", "i"))
            node = [chunk_members(seed, nodes, int(a), int(b), int(n), size)[int(m)]
                    for a, b, n, m in zip(t, c, k, j)]
            yield pa.RecordBatch.from_arrays([pa.array(t), pa.array(np.asarray(node, dtype=np.int64))],
                                             names=[TOPIC, NODE])
    frame = local_frame(spark, at[["topic", "chunk", "k", "i"]], _COUNTS + ", i long")
    got = frame.mapInArrow(pick, _PAIRS).toPandas().sort_values(TOPIC)
    return got[NODE].to_numpy()


def with_credentials(acl: DataFrame, genuine: DataFrame, forged: DataFrame) -> DataFrame:
    """Requests (topic, node, cred): the genuine ones carry their topic's credential (`acl`, the topics'
    `acl_frame`), the forged ones that credential with every bit flipped (`topics.forged`), so they
    never pass."""
    acl = F.broadcast(acl)
    right = genuine.join(acl, TOPIC).select(TOPIC, NODE, F.col("acl").alias("cred"))
    wrong = forged.join(acl, TOPIC).select(TOPIC, NODE, F.bitwise_not("acl").alias("cred"))
    return right.unionByName(wrong)


def topic_frame(spark: SparkSession, topics: int) -> DataFrame:
    """One genuine publish request per topic, from node 0 (the check reads only topic and credential)."""
    return local_frame(spark, pd.DataFrame({TOPIC: np.arange(topics, dtype=np.int64),
                                            NODE: np.zeros(topics, dtype=np.int64)}))
