"""Scribe metrics (S1/S2): delay penalty, node stress, link stress, tree shape.

Delays and depths come from supersteps down the trees; per-edge physical quantities are
computed inside Spark tasks with the broadcast ring and router tables.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
from pyspark.broadcast import Broadcast
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from scribe_spark import topology
from scribe_spark.pastry.overlay import DST, SRC, Overlay, state_partitions, with_distance
from scribe_spark.scribe.trees import NODE, TOPIC, Trees, multicast
from scribe_spark.spark.shared import share

_log = logging.getLogger(__name__)


def tree_paths(overlay: Overlay, trees: Trees) -> DataFrame:
    """Return (topic, node, delay, depth) for every tree node: the path from its root down."""
    sc = trees.edges.sparkSession.sparkContext
    roots = trees.roots.select(TOPIC, NODE, F.lit(0.0).alias("delay"), F.lit(0).alias("depth"))

    def publish(at_parent: DataFrame) -> DataFrame:
        """Every node reached sends the event copy to each of its children."""
        return at_parent.select(TOPIC, F.col(SRC).alias(NODE),
                                (F.col("delay") + F.col("edge_delay")).alias("delay"),
                                (F.col("depth") + 1).alias("depth"))

    # partitions as the node state's (about 100,000 nodes each, about 300,000 edges in S1)
    return multicast("publish", roots, with_distance(overlay, trees.edges, SRC, DST, "edge_delay"),
                     state_partitions(sc, overlay.ring.n), publish)


def delay_penalty(overlay: Overlay, trees: Trees, paths: DataFrame, subscriptions: DataFrame) -> DataFrame:
    """Return per topic: members, rmd, rad (Scribe delay from the root / IP unicast delay)."""
    m = (subscriptions.join(paths, [TOPIC, NODE]).join(trees.roots.withColumnRenamed(NODE, "root"), TOPIC))
    m = with_distance(overlay, m, "root", NODE, "ip_delay")
    agg = m.groupBy(TOPIC).agg(F.count("*").alias("members"), F.max("delay").alias("max_scribe"),
                               F.mean("delay").alias("mean_scribe"), F.max("ip_delay").alias("max_ip"),
                               F.mean("ip_delay").alias("mean_ip"), F.max("depth").alias("depth"))
    return (agg.withColumn("rmd", F.when(F.col("max_ip") > 0, F.col("max_scribe") / F.col("max_ip")))
            .withColumn("rad", F.when(F.col("mean_ip") > 0, F.col("mean_scribe") / F.col("mean_ip"))))


def node_stress(trees: Trees) -> DataFrame:
    """Return per node with any children: topics (forwarded for) and entries (children-table size)."""
    return (trees.edges.groupBy(F.col(DST).alias(NODE))
            .agg(F.countDistinct(TOPIC).alias("topics"), F.count("*").alias("entries")))


def node_stress_counts(trees: Trees) -> DataFrame:
    """Return (metric, value, nodes): how many nodes with any children forward for `value` topics (metric
    "topics") or hold `value` children-table entries ("entries"); a few rows, whatever the overlay's size."""
    pair = [F.struct(F.lit(c).alias("metric"), F.col(c).alias("value")) for c in ("topics", "entries")]
    return (node_stress(trees).select(F.explode(F.array(*pair)).alias("p")).select("p.metric", "p.value")
            .groupBy("metric", "value").agg(F.count("*").alias("nodes")))


def tree_shape(trees: Trees, paths: DataFrame) -> DataFrame:
    """Return per topic: tree nodes, depth, fan-out at the root, mean/max fan-out of other forwarders."""
    fan = trees.edges.groupBy(TOPIC, F.col(DST).alias(NODE)).agg(F.count("*").alias("fanout"))
    roots = trees.roots.withColumn("is_root", F.lit(True))
    fan = fan.join(roots, [TOPIC, NODE], "left").fillna(False, ["is_root"])
    root_fan = fan.where("is_root").select(TOPIC, F.col("fanout").alias("root_fanout"))
    other = fan.where(~F.col("is_root")).groupBy(TOPIC).agg(F.mean("fanout").alias("mean_fanout_other"),
                                                            F.max("fanout").alias("max_fanout_other"))
    size = paths.groupBy(TOPIC).agg(F.count("*").alias("tree_nodes"), F.max("depth").alias("depth"))
    return size.join(root_fan, TOPIC, "left").join(other, TOPIC, "left").fillna(0, ["root_fanout"])


@dataclass(frozen=True)
class _Paths:
    """What a link-stress task reads: shortest-path predecessors between routers (shared as a file,
    as the ring is), each link's number, and how many links there are."""

    pred: np.ndarray
    link_index: Any
    n_links: int


def _path_links(routers_bc: Broadcast, sites_bc: Broadcast, batch: pa.RecordBatch) -> tuple:
    """Return (topic, link) for every router link on the shortest paths of a batch's (topic, a, b) pairs."""
    pred, link_index = routers_bc.value.pred, routers_bc.value.link_index
    site = sites_bc.value.prox.site
    topic = batch.column(TOPIC).to_numpy()
    pair, link = topology.path_links(pred, link_index, site[batch.column("a").to_numpy()],
                                     site[batch.column("b").to_numpy()])
    return topic[pair], link


def _link_counts_task(routers_bc: Broadcast, sites_bc: Broadcast) -> Callable:
    """mapInArrow task: (topic, a, b) node pairs -> (link, copies) partial counts, one copy per pair."""
    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        counts = np.zeros(routers_bc.value.n_links, dtype=np.int64)
        for batch in batches:
            counts += np.bincount(_path_links(routers_bc, sites_bc, batch)[1], minlength=len(counts))
        used = np.flatnonzero(counts)
        yield pa.RecordBatch.from_arrays([pa.array(used.astype(np.int64)), pa.array(counts[used])],
                                         names=["link", "copies"])
    return _


def _topic_links_task(routers_bc: Broadcast, sites_bc: Broadcast) -> Callable:
    """mapInArrow task: (topic, a, b) node pairs -> the distinct (topic, link) pairs their paths use."""
    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        n_links = routers_bc.value.n_links
        for batch in batches:
            topic, link = _path_links(routers_bc, sites_bc, batch)
            key = np.unique(topic.astype(np.int64) * n_links + link)
            yield pa.RecordBatch.from_arrays([pa.array(key // n_links), pa.array(key % n_links)],
                                             names=[TOPIC, "link"])
    return _


def link_stress(overlay: Overlay, routers: topology.TransitStub, trees: Trees,
                subscriptions: DataFrame) -> dict:
    """Return per-link copies of one event per topic: {'scribe': DataFrame, 'ip': DataFrame}.

    Scribe: every tree edge carries one copy along the shortest router path parent -> child.
    IP multicast: the union of shortest paths from the root's router to the members' routers
    carries one copy per link. LAN links (node to its router) are not counted.
    """
    sc = trees.edges.sparkSession.sparkContext
    routers_bc = share(sc, _Paths(routers.pred, routers.link_index(), len(routers.edges)))
    sites_bc = overlay.ring_bc      # the ring's node sites, already shared
    scribe = (trees.edges.select(TOPIC, F.col(DST).alias("a"), F.col(SRC).alias("b"))
              .mapInArrow(_link_counts_task(routers_bc, sites_bc), "link long, copies long")
              .groupBy("link").agg(F.sum("copies").alias("copies")))
    # IP multicast: a link carries one copy per topic whose tree uses it, however Spark splits
    # a topic's pairs over tasks (the distinct is what makes it a union per topic)
    ip = (subscriptions.join(trees.roots.withColumnRenamed(NODE, "a"), TOPIC)
          .select(TOPIC, "a", F.col(NODE).alias("b"))
          .mapInArrow(_topic_links_task(routers_bc, sites_bc), f"{TOPIC} long, link long")
          .distinct().groupBy("link").agg(F.count("*").alias("copies")))
    out = {"scribe": scribe.toPandas(), "ip_multicast": ip.toPandas()}
    routers_bc.unpersist()
    return out
