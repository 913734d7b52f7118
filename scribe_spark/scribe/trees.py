"""Scribe trees as DataFrames, built and pruned by bulk-synchronous supersteps.

Layout (GraphFrame style): tree edges have `src` = child, `dst` = parent and `topic`
(topic number); `members` lists (topic, node) for every node in a topic's tree.

Subscribe follows Scribe's forward upcall: at each node on the route of SUBSCRIBE(topic),
add the sender as a child; if the node already is in the tree, stop; else join the tree
and send SUBSCRIBE on towards the topicId. Messages reaching the same (topic, node) in one
superstep collapse into one. At the root (Pastry delivers there) the message ends.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import reduce
from typing import Callable

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from scribe_spark import bsp
from scribe_spark.columns import AT, LAST, NODE, TOPIC
from scribe_spark.pastry import overlay as ov
from scribe_spark.pastry.overlay import DST, SRC, Overlay
from scribe_spark.scribe.topics import Topics
from scribe_spark.spark.arrow import local_frame

_log = logging.getLogger(__name__)

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
    return F.broadcast(local_frame(spark, pdf))


def subscriptions_frame(spark: SparkSession, topic: np.ndarray, node: np.ndarray) -> DataFrame:
    """Return a (topic, node) DataFrame of subscriptions."""
    pdf = pd.DataFrame({TOPIC: np.asarray(topic, dtype=np.int64), NODE: np.asarray(node, dtype=np.int64)})
    return local_frame(spark, pdf, SUBSCRIPTION_SCHEMA)


def subscribe(overlay: Overlay, topics: Topics, subscriptions: DataFrame,
              max_supersteps: int | None = None) -> Trees:
    """Route every SUBSCRIBE at once and return the resulting trees."""
    senders = subscriptions.select(TOPIC, NODE, F.lit(None).cast("long").alias(LAST))
    r = route_subscribes(overlay, topics, senders, None, max_supersteps)
    return Trees(r.edges.select(TOPIC, SRC, DST), r.members, r.roots, r.supersteps)


@dataclass
class Routed:
    """What a round of SUBSCRIBE routing produced."""

    edges: DataFrame      # topic, src, dst, last: one per SUBSCRIBE hop (the new child -> parent edges)
    members: DataFrame    # topic, node: the members given plus every node that joined
    roots: DataFrame      # topic, node: where a SUBSCRIBE was delivered (Pastry's destination)
    supersteps: int
    grafts: DataFrame     # topic, src, dst, last: with members given, the hops that ended at a node
                          # already in the tree (a member given or one that joined earlier): dst grafts src


def route_subscribes(overlay: Overlay, topics: Topics, senders: DataFrame, members: DataFrame | None,
                     max_supersteps: int | None = None,
                     detect_roots: bool = False,
                     forward: Callable[[DataFrame], DataFrame] | None = None) -> Routed:
    """Route SUBSCRIBE(topic) from every sender (topic, node, last) through forward upcalls.

    Senders send whether or not they are in `members` (a repair SUBSCRIBE comes from a tree
    node). At each later node: add the sender as child; stop if the node is a member (a
    graft), else join and forward. Messages meeting at a (topic, node) collapse into one that
    carries the smallest `last` (the last delivered sequence number, for the reliable
    extension). A message delivered at a non-member makes it the root; with `detect_roots` a
    message that stops at a member which is Pastry's destination marks that member as root too
    (root failover: the new numerically closest node already was a forwarder).

    `forward`, an application's forwardHandler, sees the messages that reach nodes in each
    superstep (topic, at, from, last) and returns those that go on, possibly changed; a message
    it drops stops where it is, without making its sender a child.
    """
    keys = topic_keys(senders.sparkSession, topics)
    limit = max_supersteps or overlay.ring.route_bound
    carry = bsp.Carry()
    # the members so far, gathered as one resident chunk per superstep (the given ones first): a
    # superstep shuffles its arrivals once and meets every chunk where it already is; partitions as
    # the node state's
    parts = ov.state_partitions(senders.sparkSession.sparkContext, overlay.ring.n)
    given = None if members is None else members.select(TOPIC, NODE).distinct()
    if given is not None:
        carry.gather("members", given, (TOPIC, NODE), parts)

    def subscribe(arrivals: DataFrame, k: int, n: int) -> bsp.Split:
        """SUBSCRIBEs reach nodes: each adds its sender as a child; members stop them, other nodes join."""
        chunks = carry.gathered("members")
        members = reduce(DataFrame.unionByName, chunks) if chunks else None
        out = {}
        if forward is not None and k > 1:
            arrivals = carry.cut(forward(arrivals).select(TOPIC, AT, "from", LAST))
        out["edges"] = (arrivals.where(F.col("from").isNotNull())
                        .select(TOPIC, F.col("from").alias(SRC), F.col(AT).alias(DST), LAST))
        arrived = arrivals.groupBy(TOPIC, F.col(AT).alias(NODE)).agg(F.min(LAST).alias(LAST))
        if k == 1 or members is None:
            joining = arrived
        else:
            joining = reduce(lambda rest, chunk: rest.join(chunk, [TOPIC, NODE], "left_anti"), chunks,
                             arrived)
            if given is not None:   # only repair reads the grafts
                out["grafts"] = (arrivals.join(members.withColumnRenamed(NODE, AT), [TOPIC, AT], "left_semi")
                                 .select(TOPIC, F.col("from").alias(SRC), F.col(AT).alias(DST), LAST))
            if detect_roots:
                stopped = arrived.join(members, [TOPIC, NODE], "left_semi")
                at_root = ov.next_hop(overlay, stopped.join(keys, TOPIC).withColumnRenamed(NODE, AT))
                out["member_roots"] = at_root.where("delivered").select(TOPIC, F.col(AT).alias(NODE))
        joining = carry.keep("joining", joining)
        new = joining.select(TOPIC, NODE)
        if k == 1 and members is not None:   # step 1's senders may be members already
            new = new.join(members, [TOPIC, NODE], "left_anti")
        chunk = carry.gather("members", new, (TOPIC, NODE), parts)
        out["members"] = reduce(DataFrame.unionByName, [*chunks, chunk]) if k == 1 else chunk
        hop = ov.next_hop(overlay, joining.join(keys, TOPIC).withColumnRenamed(NODE, AT))

        def onward(hop: DataFrame) -> DataFrame:
            return (hop.where(~F.col("delivered"))
                    .select(TOPIC, F.col("next").alias(AT), F.col(AT).alias("from"), LAST))

        def roots(hop: DataFrame) -> DataFrame:
            return hop.where("delivered").select(TOPIC, F.col(AT).alias(NODE))

        return bsp.Split(hop, onward, {**out, "roots": roots})

    start = senders.select(TOPIC, F.col(NODE).alias(AT), F.lit(None).cast("long").alias("from"), LAST)
    try:
        # the SUBSCRIBEs outnumber the nodes: their cuts go to disk and leave memory to the node state
        done = bsp.run("subscribe", start, subscribe, limit, unit="SUBSCRIBE messages", carry=carry,
                       on_disk=True)
    finally:   # the loop releases the carry when it ends; this covers a loop that raised
        carry.release()
    e = done.emitted
    empty = start.select(TOPIC, F.col("from").alias(SRC), F.col(AT).alias(DST), LAST).limit(0)
    if "members" in e:
        members = e["members"]
    elif given is not None:   # nobody sent
        members = given.localCheckpoint()
    else:
        members = start.select(TOPIC, F.col(AT).alias(NODE)).limit(0)
    roots = e.get("roots", empty.select(TOPIC, F.col(DST).alias(NODE)))
    if "member_roots" in e:
        roots = e["member_roots"].unionByName(roots)
    return Routed(e.get("edges", empty), members, roots.distinct().localCheckpoint(), done.supersteps,
                  e.get("grafts", empty))


def multicast(loop: str, starts: DataFrame, edges: DataFrame, partitions: int,
              forward: Callable[[DataFrame], DataFrame]) -> DataFrame:
    """Send messages down the trees, one tree level per superstep; return every copy that reached a node.

    `starts` holds messages (topic, node, ...) at tree nodes, usually the roots; `edges` the trees
    (topic, src = child, dst = parent, ...). At each superstep every node a copy reached sends one
    to each child: `forward(at_parent)` makes the children's copies from the messages joined with
    the edges whose parent (`node`) they are at, one row per child `src`. The result has the
    messages' columns, one row per (message, node) reached, the starts included.
    """
    down = bsp.resident(edges, (TOPIC, DST), partitions)
    by_parent = down.withColumnRenamed(DST, NODE)

    def send(level: DataFrame, k: int, n: int) -> bsp.Superstep:
        """Every node a copy reached sends one to each of its children."""
        return bsp.Superstep(forward(level.join(by_parent, [TOPIC, NODE])), {"reached": level})

    try:
        # no path in a tree is longer than its edges; more supersteps would mean a cycle
        out = bsp.run(loop, starts, send, bsp.rows(down) + 1, unit="event copies")
        return out.emitted.get("reached", starts.limit(0))
    finally:
        down.unpersist()


def unsubscribe(trees: Trees, subscriptions: DataFrame, leaving: DataFrame) -> Trees:
    """Remove `leaving` subscriptions and prune, superstep by superstep, as Scribe does.

    A node that is not a subscriber, not the root, and has an empty children table sends
    UNSUBSCRIBE to its parent, which removes it as a child; this repeats up the tree.
    """
    staying = subscriptions.join(leaving, [TOPIC, NODE], "left_anti")
    carry = bsp.Carry(edges=trees.edges)

    def pruned(edges: DataFrame) -> DataFrame:
        """UNSUBSCRIBE (topic, node) from every tree node that is a leaf and not a subscriber."""
        has_children = edges.select(TOPIC, F.col(DST).alias(NODE)).distinct()
        return (edges.select(TOPIC, F.col(SRC).alias(NODE))
                .join(has_children, [TOPIC, NODE], "left_anti")
                .join(staying, [TOPIC, NODE], "left_anti"))

    def prune(inflight: DataFrame, k: int, n: int) -> bsp.Superstep:
        """Each parent removes the children that unsubscribed; those left childless unsubscribe in turn."""
        edges = carry.keep("edges", carry["edges"].join(inflight.withColumnRenamed(NODE, SRC), [TOPIC, SRC],
                                                         "left_anti"))
        return bsp.Superstep(pruned(edges))

    # every superstep removes at least one edge
    k = bsp.run("unsubscribe", pruned(trees.edges), prune, bsp.rows(trees.edges) + 1,
                unit="UNSUBSCRIBE messages", carry=carry).supersteps
    edges = carry["edges"]
    in_tree = (edges.select(TOPIC,
                            F.col(SRC).alias(NODE)).unionByName(edges.select(TOPIC, F.col(DST).alias(NODE)))
               .unionByName(staying.select(TOPIC, NODE)).unionByName(trees.roots).distinct())
    return Trees(edges, in_tree.localCheckpoint(), trees.roots, k)
