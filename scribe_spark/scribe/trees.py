"""Scribe trees as DataFrames, built and pruned by bulk-synchronous supersteps.

Layout (GraphFrame style): tree edges have `src` = child, `dst` = parent and `topic`
(topic number); `members` lists (topic, node) for every node in a topic's tree.

Subscribe follows Scribe's forward upcall: at each node on the route of SUBSCRIBE(topic),
add the sender as a child; if the node already is in the tree, stop; else join the tree
and send SUBSCRIBE on towards the topicId. Messages reaching the same (topic, node) in one
superstep collapse into one. At the root (Pastry delivers there) the message ends.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from scribe_spark.pastry import overlay as ov
from scribe_spark.pastry.overlay import DST, SRC, Overlay
from scribe_spark.scribe.topics import Topics

TOPIC, NODE = "topic", "node"

SUBSCRIPTION_SCHEMA = T.StructType([T.StructField(TOPIC, T.LongType(), False),
                                    T.StructField(NODE, T.LongType(), False)])


@dataclass
class Trees:
    """The Scribe trees of all topics."""

    edges: DataFrame      # topic, src (child), dst (parent)
    members: DataFrame    # topic, node: every node in the topic's tree (forwarders, subscribers, root)
    roots: DataFrame      # topic, node: the root reached by the SUBSCRIBE messages
    supersteps: int


def topic_keys(spark: SparkSession, topics: Topics) -> DataFrame:
    """Return (topic, key_hi, key_lo): each topic's id as two signed longs."""
    pdf = pd.DataFrame({TOPIC: np.arange(topics.n, dtype=np.int64),
                        "key_hi": topics.hi.view(np.int64), "key_lo": topics.lo.view(np.int64)})
    return F.broadcast(spark.createDataFrame(pdf))


def subscriptions_frame(spark: SparkSession, topic: np.ndarray, node: np.ndarray) -> DataFrame:
    """Return a (topic, node) DataFrame of subscriptions."""
    pdf = pd.DataFrame({TOPIC: np.asarray(topic, dtype=np.int64), NODE: np.asarray(node, dtype=np.int64)})
    return spark.createDataFrame(pdf, SUBSCRIPTION_SCHEMA)


def subscribe(overlay: Overlay, topics: Topics, subscriptions: DataFrame,
              log: Callable[[str], None] = print, max_supersteps: int | None = None) -> Trees:
    """Route every SUBSCRIBE at once and return the resulting trees."""
    spark = subscriptions.sparkSession
    keys = topic_keys(spark, topics)
    limit = max_supersteps or 4 * overlay.ring.digits + 16
    # superstep 0: every subscriber is in its topic's tree and sends SUBSCRIBE
    arrivals = subscriptions.select(TOPIC, F.col(NODE).alias("at"), F.lit(None).cast("long").alias("from"))
    members = None
    edges, roots = [], []
    k = 0
    while True:
        t0 = time.time()
        arrivals = arrivals.localCheckpoint()
        edges.append(arrivals.where(F.col("from").isNotNull())
                     .select(TOPIC, F.col("from").alias(SRC), F.col("at").alias(DST)))
        arrived = arrivals.select(TOPIC, F.col("at").alias(NODE)).distinct()
        joining = arrived if members is None else arrived.join(members, [TOPIC, NODE], "left_anti")
        joining = joining.localCheckpoint()
        members = joining if members is None else members.unionByName(joining).localCheckpoint()
        hop = ov.next_hop(overlay, joining.join(keys, TOPIC).withColumnRenamed(NODE, "at")).localCheckpoint()
        roots.append(hop.where("delivered").select(TOPIC, F.col("at").alias(NODE)))
        arrivals = hop.where(~F.col("delivered")).select(TOPIC, F.col("next").alias("at"), F.col("at").alias("from"))
        n = arrivals.count()
        log(f"subscribe superstep {k}: {n} SUBSCRIBE messages in flight ({time.time() - t0:.1f}s)")
        if n == 0:
            break
        k += 1
        if k > limit:
            raise RuntimeError(f"subscribe did not converge within {limit} supersteps")
    edge_df = _union(edges).localCheckpoint()
    root_df = _union(roots).localCheckpoint()
    return Trees(edge_df, members, root_df, k + 1)


def _union(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def unsubscribe(trees: Trees, subscriptions: DataFrame, leaving: DataFrame,
                log: Callable[[str], None] = print) -> Trees:
    """Remove `leaving` subscriptions and prune, superstep by superstep, as Scribe does.

    A node that is not a subscriber, not the root, and has an empty children table sends
    UNSUBSCRIBE to its parent, which removes it as a child; this repeats up the tree.
    """
    staying = subscriptions.join(leaving, [TOPIC, NODE], "left_anti")
    edges = trees.edges
    k = 0
    while True:
        t0 = time.time()
        has_children = edges.select(TOPIC, F.col(DST).alias(NODE)).distinct()
        prune = (edges.select(TOPIC, F.col(SRC).alias(NODE))
                 .join(has_children, [TOPIC, NODE], "left_anti")
                 .join(staying, [TOPIC, NODE], "left_anti")).localCheckpoint()
        n = prune.count()
        log(f"unsubscribe superstep {k}: {n} UNSUBSCRIBE messages in flight ({time.time() - t0:.1f}s)")
        if n == 0:
            break
        edges = edges.join(prune.withColumnRenamed(NODE, SRC), [TOPIC, SRC], "left_anti").localCheckpoint()
        k += 1
    in_tree = (edges.select(TOPIC, F.col(SRC).alias(NODE)).unionByName(edges.select(TOPIC, F.col(DST).alias(NODE)))
               .unionByName(staying.select(TOPIC, NODE)).unionByName(trees.roots).distinct())
    return Trees(edges, in_tree.localCheckpoint(), trees.roots, k)
