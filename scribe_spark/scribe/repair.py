"""Scribe tree repair after silent node failures (docs/model.md, Scribe), as supersteps.

What happens at the detection round, when children have missed `timeout` heartbeats (events
count as heartbeats) and parents have stopped hearing from dead children:

1. expiry: children-table entries of dead children are no longer refreshed and expire. A
   forwarder left with no children that is not a subscriber sends UNSUBSCRIBE to its parent,
   recursively (`trees.unsubscribe`).
2. faultHandler: every live tree node whose parent is dead drops it and routes a repair
   SUBSCRIBE(topic); in the reliable extension it carries the last sequence number it delivered.
3. forward upcalls: the application's forwardHandler sees the message at each node; then a
   member adds the sender as child and stops the message (a graft); a non-member joins and
   forwards; messages meeting at one node collapse and keep the smallest sequence number
   (`trees.route_subscribes`).
4. root failover: where Pastry delivers a repair SUBSCRIBE (the live node numerically closest
   to topicId) is the root. A new root that was a forwarder drops its own parent; that entry
   expires and the old parent prunes itself as in 1. The new root has the topic's state
   (creator, ACL, sequence counter) only if it is one of the `replicas` nodes of the old
   root's leaf set nearest to the topicId, which the old root kept up to date; otherwise
   the topic is lost (publishes are refused from then on).
5. subscribeHandler at each graft: in the reliable, ordered extension the graft point
   retransmits its buffered events above the request's sequence number; the event stream
   that plays this out is `scribe/reliable.py`, driven by `experiments/scribe_repair.py`.

The three upcalls are an application's: pass `Upcalls(fault=..., forward=..., subscribe=...)`
to `repair_trees`. `PLAIN` is Scribe without them; `reliable(last)` is the extension.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from scribe_spark import bsp
from scribe_spark.pastry.kernels import Ring
from scribe_spark.pastry.overlay import DST, ID, SRC, Overlay
from scribe_spark.scribe import trees as tr
from scribe_spark.scribe.topics import Topics
from scribe_spark.scribe.trees import LAST, NODE, TOPIC, Trees
from scribe_spark.spark.arrow import local_frame

_log = logging.getLogger(__name__)


def plain_fault(orphans: DataFrame) -> DataFrame:
    """faultHandler of plain Scribe: the repair SUBSCRIBE (topic, node, last) carries no sequence number."""
    return orphans.select(TOPIC, NODE, F.lit(None).cast("long").alias(LAST))


@dataclass(frozen=True)
class Upcalls:
    """An application's upcalls in tree repair (docs/model.md, Scribe), as transformations of message frames.

    fault(orphans: topic, node) -> the repair SUBSCRIBEs (topic, node, last) they send;
    forward(msgs: topic, at, from, last) -> the SUBSCRIBEs that go on from the nodes they
        reached in a superstep, possibly changed (see `trees.route_subscribes`);
    subscribe(grafts: topic, src, dst, last) -> what each graft point `dst` does for its new
        child `src`, as a frame kept in `TreeRepair.handled` (None: nothing).
    """

    fault: Callable[[DataFrame], DataFrame] = plain_fault
    forward: Callable[[DataFrame], DataFrame] | None = None
    subscribe: Callable[[DataFrame], DataFrame] | None = None


PLAIN = Upcalls()


def fault_handler(orphans: DataFrame, last: DataFrame) -> DataFrame:
    """The orphans' repair SUBSCRIBEs (topic, node, last), each with its last delivered sequence number."""
    return orphans.join(last, TOPIC, "left").select(TOPIC, NODE, F.col(LAST).cast("long").alias(LAST))


def retransmissions(grafts: DataFrame) -> DataFrame:
    """Reliable extension's subscribeHandler: graft point `sender` resends buffered events above `above`."""
    return grafts.select(TOPIC, F.col(DST).alias("sender"), F.col(SRC).alias("child"),
                         F.col(LAST).alias("above"))


def reliable(last: DataFrame) -> Upcalls:
    """The reliable, ordered extension's upcalls; `last` gives (topic, last) delivered by the orphans."""
    return Upcalls(fault=lambda orphans: fault_handler(orphans, last), subscribe=retransmissions)


@dataclass
class TreeRepair:
    """The repaired trees and what repairing them took."""

    trees: Trees
    grafts: DataFrame      # topic, src, dst, last: the edges the repair SUBSCRIBEs created
    failover: pd.DataFrame  # topic, old_root, new_root, replicated (new root held the replicated state)
    counts: dict
    handled: DataFrame | None = None   # what the subscribeHandler returned for the grafts


def _nodes(spark, nodes: np.ndarray, name: str) -> DataFrame:
    return F.broadcast(local_frame(spark, pd.DataFrame({name: np.asarray(nodes, dtype=np.int64)})))


def replicas(ring: Ring, state: pd.DataFrame, topics: Topics, roots: dict[int, int],
             k: int) -> dict[int, set[int]]:
    """Return, per topic, the k members of its root's leaf set numerically closest to the topicId.

    They hold the replicated root state. Closest to the topicId (not to the root) makes the next
    root, the live node then closest to the topicId, one of them unless all k fail.
    """
    leaf = dict(zip(state[ID], state["leaf"]))
    out = {}
    for t, r in roots.items():
        cand = np.unique(np.asarray(leaf[r], dtype=np.int64))
        cand = cand[cand != r]
        key = (int(topics.hi[t]) << 64) | int(topics.lo[t])
        d = [min((key - x) % (1 << 128), (x - key) % (1 << 128))
             for x in ((int(ring.hi[c]) << 64) | int(ring.lo[c]) for c in cand)]
        out[int(t)] = set(cand[np.argsort(d, kind="stable")[:k]].tolist())
    return out


def repair_trees(overlay: Overlay, topics: Topics, trees: Trees, subscriptions: DataFrame, dead: np.ndarray,
                 replica_sets: dict[int, set[int]], upcalls: Upcalls = PLAIN) -> TreeRepair:
    """Repair every tree after the nodes in `dead` failed; `overlay` is the repaired Pastry overlay.

    `replica_sets` maps each topic whose root failed to the nodes that hold its replicated state;
    `upcalls` are the application's (plain Scribe by default).
    """
    spark = subscriptions.sparkSession
    dead_ids = np.flatnonzero(dead)
    dead_src, dead_dst = _nodes(spark, dead_ids, SRC), _nodes(spark, dead_ids, DST)
    dead_node = _nodes(spark, dead_ids, NODE)
    n0 = bsp.rows(trees.edges)

    # 1. expiry of dead children, then UNSUBSCRIBE cascades
    edges = trees.edges.join(dead_src, SRC, "left_anti").localCheckpoint()
    expired = n0 - bsp.rows(edges)
    leaving = subscriptions.join(dead_node, NODE, "left_semi")
    live_roots = trees.roots.join(dead_node, NODE, "left_anti")
    pruned = tr.unsubscribe(Trees(edges, trees.members, live_roots, 0), subscriptions, leaving)
    unsubscribes = n0 - expired - bsp.rows(pruned.edges)

    # 2. orphans: live nodes whose parent is dead
    to_dead = pruned.edges.join(dead_dst, DST, "left_semi")
    orphans = to_dead.select(TOPIC, F.col(SRC).alias(NODE)).localCheckpoint()
    edges = pruned.edges.join(dead_dst, DST, "left_anti")
    members = (edges.select(TOPIC,
                            F.col(SRC).alias(NODE)).unionByName(edges.select(TOPIC, F.col(DST).alias(NODE)))
               .unionByName(orphans).unionByName(live_roots.select(TOPIC, NODE))
               .unionByName(subscriptions.join(dead_node, NODE, "left_anti").select(TOPIC, NODE))
               .distinct().localCheckpoint())
    n_orphans = bsp.rows(orphans)
    _log.info(f"{expired} children entries expired, {unsubscribes} UNSUBSCRIBE messages; "
              f"{n_orphans} orphans re-subscribe")

    # 3.-4. repair SUBSCRIBEs; roots where they are delivered
    routed = tr.route_subscribes(overlay, topics, upcalls.fault(orphans), members, detect_roots=True,
                                 forward=upcalls.forward)
    grafts = routed.edges.localCheckpoint()
    new_roots = routed.roots.toPandas().sort_values(TOPIC)
    old_roots = trees.roots.toPandas().set_index(TOPIC)[NODE]
    failover = []
    for t, r in zip(new_roots[TOPIC], new_roots[NODE]):
        r0 = int(old_roots[t])
        if r != r0:
            if not dead[r0]:
                raise RuntimeError(
                    f"topic {t}: a repair SUBSCRIBE was delivered at {r}, but its root {r0} is alive")
            failover.append({TOPIC: int(t), "old_root": r0, "new_root": int(r),
                             "replicated": int(r) in replica_sets[int(t)]})
    failover = pd.DataFrame(failover, columns=[TOPIC, "old_root", "new_root", "replicated"])
    promoted = local_frame(spark, failover[[TOPIC, "new_root"]].rename(columns={"new_root": SRC}),
                           f"{TOPIC} long, {SRC} long")
    n_promoted_edges = edges.join(promoted, [TOPIC, SRC], "left_semi").count()
    edges = (edges.unionByName(grafts.select(TOPIC, SRC, DST))
             .join(F.broadcast(promoted), [TOPIC, SRC], "left_anti").localCheckpoint())
    taken_over = failover[[TOPIC, "new_root"]].rename(columns={"new_root": NODE})
    roots = (live_roots.select(TOPIC, NODE)
             .unionByName(local_frame(spark, taken_over, f"{TOPIC} long, {NODE} long"))).localCheckpoint()
    # the new roots' old parents lose a child whose entry expires: prune again
    n1 = bsp.rows(edges)
    final = tr.unsubscribe(Trees(edges, routed.members, roots, 0), subscriptions, leaving)
    unsubscribes += n1 - bsp.rows(final.edges)
    n_grafts = bsp.rows(grafts)
    grafted = routed.grafts.localCheckpoint()
    counts = {"expired_entries": expired, "unsubscribe_messages": unsubscribes, "orphans": n_orphans,
              "subscribe_messages": n_grafts, "grafts": bsp.rows(grafted),
              "repair_supersteps": routed.supersteps,
              "root_failovers": len(failover), "promoted_forwarders": n_promoted_edges,
              "topics_lost": int((~failover.replicated).sum())}
    _log.info(f"repair: {n_grafts} SUBSCRIBE messages in {routed.supersteps} supersteps, {len(failover)} "
        f"root failovers ({counts['topics_lost']} without the replicated state)")
    handled = upcalls.subscribe(grafted).localCheckpoint() if upcalls.subscribe is not None else None
    return TreeRepair(Trees(final.edges, final.members, roots, routed.supersteps), grafts, failover, counts,
                      handled)


def connected(overlay: Overlay, trees: Trees, dead: np.ndarray) -> pd.DataFrame:
    """Return (topic, node) of the live nodes joined to a live root by live tree edges."""
    from scribe_spark.scribe.metrics import tree_paths
    spark = trees.edges.sparkSession
    dead_ids = np.flatnonzero(dead)
    edges = (trees.edges.join(_nodes(spark, dead_ids, SRC), SRC, "left_anti")
             .join(_nodes(spark, dead_ids, DST), DST, "left_anti"))
    roots = trees.roots.join(_nodes(spark, dead_ids, NODE), NODE, "left_anti")
    with bsp.quiet():   # a check, not a protocol step
        paths = tree_paths(overlay, Trees(edges.select(TOPIC, SRC, DST), trees.members, roots, 0))
    return paths.select(TOPIC, NODE).toPandas()


def joined(overlay: Overlay, trees: Trees, subs: pd.DataFrame, dead: np.ndarray) -> np.ndarray:
    """Return, per (topic, node) row of `subs`, whether it is joined to a live root by live tree edges."""
    reach = connected(overlay, trees, dead)
    return pd.MultiIndex.from_frame(subs[[TOPIC, NODE]]).isin(pd.MultiIndex.from_frame(reach[[TOPIC, NODE]]))
