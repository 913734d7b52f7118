"""Sequencing groups (docs/model.md, TNO) as a Spark self-join of subscriptions on subscriber.

SG_T = T plus every T' that at least `min_shared` subscriptions contain together with T
(2 for TNO, 1 for the causal variant). A subscription is one subscriber's set of topics.
Instead of exploding every subscriber's topic pairs before the shuffle, each partition
combines its subscribers first: with A_p the partition's subscriber x topic 0/1 matrix,
A_p^T A_p (sparse, SciPy, inside mapInArrow) holds its co-occurrence counts; only those
per-partition counts are shuffled and summed.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from scipy import sparse

from scribe_spark.columns import MEMBER, SUBSCRIBER, TOPIC

PAIR_SCHEMA = "t1 long, t2 long, shared long"


def _cooccurrence_counts(row: np.ndarray, col: np.ndarray, n_cols: int) -> sparse.csr_matrix:
    """Return A^T A for the 0/1 incidence A[row, col]: entry (t, u) = rows holding both t and u.

    Duplicate (row, col) pairs count once; the diagonal counts each column's rows.
    """
    a = sparse.csr_matrix((np.ones(len(row), dtype=np.int32), (row, col)), shape=(int(row.max()) + 1, n_cols))
    a.data[:] = 1
    return (a.T @ a).tocsr()


def _cooccurrence(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    subs, tops = [], []
    for b in batches:
        subs.append(b.column(SUBSCRIBER).to_numpy())
        tops.append(b.column(TOPIC).to_numpy())
    if not subs:
        return
    s = np.concatenate(subs)
    t = np.concatenate(tops).astype(np.int64)
    if len(s) == 0:
        return
    row = pd.factorize(s)[0]                   # hashing, no sort
    width = int(t.max()) + 1
    if width <= 4 * len(t) + 1024:             # topic numbers are dense: index columns directly
        cols, col = np.arange(width), t
    else:
        cols, col = np.unique(t, return_inverse=True)
    c = sparse.triu(_cooccurrence_counts(row, col, len(cols)), k=0).tocoo()   # diagonal: t's subscribers
    for start in range(0, c.nnz, 1_000_000):
        sl = slice(start, start + 1_000_000)
        yield pa.RecordBatch.from_arrays([pa.array(cols[c.row[sl]].astype(np.int64)),
                                          pa.array(cols[c.col[sl]].astype(np.int64)),
                                          pa.array(c.data[sl].astype(np.int64))],
                                         names=["t1", "t2", "shared"])


def shared_counts(subscriptions: DataFrame, partitions: int | None = None) -> DataFrame:
    """Return (t1, t2, shared) for t1 <= t2: how many subscriptions contain both topics.

    Rows with t1 == t2 give each subscribed topic's number of subscriptions.
    """
    parts = partitions or subscriptions.sparkSession.sparkContext.defaultParallelism
    # (int columns shuffle half the bytes of long ones; callers with small ids should use them)
    per_part = (subscriptions.select(SUBSCRIBER, TOPIC).repartition(parts, SUBSCRIBER)
                .mapInArrow(_cooccurrence, PAIR_SCHEMA))
    return per_part.groupBy("t1", "t2").agg(F.sum("shared").alias("shared"))


def _group_pairs(subscriptions: DataFrame, causal: bool, partitions: int | None) -> DataFrame:
    need = 1 if causal else 2
    return shared_counts(subscriptions,
                         partitions).where((F.col("t1") == F.col("t2")) | (F.col("shared") >= need))


def sequencing_groups(subscriptions: DataFrame, causal: bool = False,
                      partitions: int | None = None) -> DataFrame:
    """Return one row per (topic, member) of SG_topic, the topic itself included."""
    t1, t2 = F.col("t1"), F.col("t2")
    rows = F.when(t1 == t2, F.array(F.struct(t1.alias(TOPIC), t1.alias(MEMBER)))).otherwise(
        F.array(F.struct(t1.alias(TOPIC), t2.alias(MEMBER)), F.struct(t2.alias(TOPIC), t1.alias(MEMBER))))
    return _group_pairs(subscriptions, causal, partitions).select(F.explode(rows).alias("r")).select("r.*")


def group_sizes(groups: DataFrame) -> DataFrame:
    """Return (topic, size) with size = |SG_topic| (the timestamp size of an event on it)."""
    return groups.groupBy(TOPIC).agg(F.count("*").alias("size"))


def sequencing_group_sizes(subscriptions: DataFrame, causal: bool = False,
                           partitions: int | None = None) -> DataFrame:
    """Return (topic, size) directly from the pair counts (one aggregation, no group rows)."""
    pairs = _group_pairs(subscriptions, causal, partitions)
    ends = F.when(F.col("t1") == F.col("t2"), F.array("t1")).otherwise(F.array("t1", "t2"))
    return pairs.select(F.explode(ends).alias(TOPIC)).groupBy(TOPIC).agg(F.count("*").alias("size"))


def local_groups(subscriptions: dict[int, set[int]], causal: bool = False) -> dict[int, set[int]]:
    """Return SG_T for every subscribed topic, computed in one process (small inputs, simulations)."""
    rows = [(s, t) for s, ts in subscriptions.items() for t in ts]
    sub = np.array([r[0] for r in rows], dtype=np.int64)
    top = np.array([r[1] for r in rows], dtype=np.int64)
    _, row = np.unique(sub, return_inverse=True)
    c = _cooccurrence_counts(row, top, int(top.max()) + 1).tocoo()
    need = 1 if causal else 2
    out = {int(t): {int(t)} for t in np.unique(top)}
    for i, j, v in zip(c.row, c.col, c.data):
        if i != j and v >= need:
            out[int(i)].add(int(j))
    return out


def collect_groups(groups_df: DataFrame) -> dict[int, set[int]]:
    """Return a sequencing-groups frame as {topic: set of members}."""
    out: dict[int, set[int]] = {}
    for r in groups_df.collect():
        out.setdefault(int(r[TOPIC]), set()).add(int(r[MEMBER]))
    return out
