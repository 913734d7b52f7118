"""Scribe events in simulated time: each event goes down its topic's tree at the link delays.

The trees are those Scribe builds on the overlay at the start (`trees.subscribe`); an event reaches its
topic's root by Pastry in time (`pastry.timed`, routed as a lookup of the topicId). A node holds its
Scribe state from the start until it first goes down: one that went down (even if it came back since)
is in no tree any more, so an event reaching it is dropped with the copies it would have sent on. The
trees are not repaired (no heartbeats, no re-SUBSCRIBE): what the run measures is how events fare on the
trees of the start while the overlay under them changes.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from scribe_spark.columns import NODE, TOPIC
from scribe_spark.pastry.overlay import DST, SRC, Overlay, state_partitions, with_distance
from scribe_spark.scribe.trees import Trees, multicast

EVENT, T_AT, GONE = "event", "t", "t_gone"


def deliver(overlay: Overlay, trees: Trees, at_root: DataFrame, gone: DataFrame, hop_ms: float,
            until_ms: float) -> DataFrame:
    """Every copy of the events that reached a node still in its tree: (event, topic, node, t).

    `at_root` has (event, topic, node, t): each event where and when Pastry delivered it, kept only at its
    topic's root; `gone` has (node, t_gone): when each node that went down first did. A node u holding a
    copy at t sends one to each child c, which arrives at t + link(u, c) + hop_ms and is kept if that is
    before c first went down and before `until_ms` (a message arriving at the very time its node goes
    down finds it down, as in `pastry.timed`).
    """
    gone = F.broadcast(gone.select(NODE, GONE))
    roots = at_root.join(trees.roots.select(TOPIC, NODE), [TOPIC, NODE], "left_semi")
    starts = _kept(roots.select(EVENT, TOPIC, NODE, T_AT), gone, until_ms)

    def send(at_parent: DataFrame) -> DataFrame:
        """Each node a copy reached sends one to each child, kept where the child still holds the tree."""
        sent = at_parent.select(EVENT, TOPIC, F.col(SRC).alias(NODE),
                                (F.col(T_AT) + F.col("edge_delay") + F.lit(float(hop_ms))).alias(T_AT))
        return _kept(sent, gone, until_ms)

    # the delay from parent to child, in that order (the sender's link to the receiver)
    edges = with_distance(overlay, trees.edges.select(TOPIC, SRC, DST), DST, SRC, "edge_delay")
    sc = overlay.state.sparkSession.sparkContext
    reached = multicast("timed events", starts, edges, state_partitions(sc, overlay.ring.n), send)
    return reached.select(EVENT, TOPIC, NODE, T_AT)


def _kept(copies: DataFrame, gone: DataFrame, until_ms: float) -> DataFrame:
    """The copies that arrive before their node first went down and before the end."""
    t, left = F.col(T_AT), F.col(GONE)
    kept = (left.isNull() | (t < left)) & (t < F.lit(float(until_ms)))
    return copies.join(gone, NODE, "left").filter(kept).drop(GONE)
