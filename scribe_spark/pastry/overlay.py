"""Pastry node state as Spark DataFrames and routing as bulk-synchronous supersteps.

Layout (GraphFrame style): the state frame is keyed by vertex `id` (node number) with
columns `leaf`, `rt`, `nbr` (arrays of node numbers; `rt` is rows x 2^b, -1 = empty).
`routing_edges` explodes it into edges `src`/`dst`. The ring (ids, locations) is small
and broadcast; the per-node state stays distributed.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
from pyspark import SparkContext
from pyspark.broadcast import Broadcast
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from scribe_spark import bsp
from scribe_spark.columns import AT, DST, ID, SRC
from scribe_spark.pastry import kernels
from scribe_spark.pastry.kernels import Ring
from scribe_spark.sizes import state_bytes
from scribe_spark.spark.arrow import (
    as_u64,
    batch_columns,
    list_array,
    local_frame,
    values_offsets,
)
from scribe_spark.spark.shared import release, share
from scribe_spark.streams import Purpose, stream

_log = logging.getLogger(__name__)

NODES = T.ArrayType(T.IntegerType(), False)   # node numbers in the state arrays: int32 (N < 2^31), -1 = empty
STATE_SCHEMA = T.StructType([
    T.StructField(ID, T.LongType(), False),
    T.StructField("leaf", NODES, False),
    T.StructField("rt", NODES, False),
    T.StructField("nbr", NODES, False),
])

MESSAGE_SCHEMA = T.StructType([
    T.StructField("mid", T.LongType(), False),
    T.StructField(SRC, T.LongType(), False),
    T.StructField("key_hi", T.LongType(), False),   # uint64 bits stored in a signed long
    T.StructField("key_lo", T.LongType(), False),
    T.StructField(AT, T.LongType(), False),
    T.StructField("hops", T.IntegerType(), False),
    T.StructField("distance", T.DoubleType(), False),
    T.StructField("rare", T.IntegerType(), False),   # hops taken by the rare-case rule
    T.StructField("timeouts", T.IntegerType(), False),   # attempts to forward to a dead node
])

# a message in flight also carries the slot of the routing-table entry its node reads for its key
# (kernels.table_slot; -1: not known), so that the superstep's join reads that entry and ships the
# node's rt and nbr rows to Python only where it is empty (about 150 array elements a message less)
SLOT = T.StructField("slot", T.IntegerType(), False)

STEP_SCHEMA = T.StructType(MESSAGE_SCHEMA.fields + [
    SLOT,
    T.StructField("done", T.BooleanType(), False),
    T.StructField("direct", T.DoubleType(), False),
    T.StructField("prev", T.LongType(), False),   # the node that took this step
    T.StructField("met", T.ArrayType(T.LongType(), False), False),   # dead nodes it tried in this step
])

STEP_ONLY = ("slot", "done", "prev", "met")   # what a delivered message no longer needs


@dataclass
class Overlay:
    """A Pastry overlay: the broadcast ring and the distributed node state.

    `converged`: every node's leaf set holds exactly its nearest live nodes on the ring (as
    `build_overlay` makes it), so that routing may take leaf-set hops at once and read the leaf
    sets from the ring (`kernels.leaf_window`), not from the state (see `route`). Overlays from
    joins or failures leave it False.
    """

    ring: Ring
    ring_bc: Broadcast
    state: DataFrame
    mode: str
    converged: bool = False
    members: "Members | None" = None   # built with nodes absent: those present (None: every node)
    members_bc: Broadcast | None = None   # `members` shared with the tasks that built the state

    def routing_edges(self) -> DataFrame:
        """Return routing-table entries as edges (src, dst, row, col)."""
        return routing_edges(self.state, self.ring.b)

    def unpersist(self) -> None:
        self.state.unpersist()
        if self.members_bc is not None:   # kept until now: a lost cached block is rebuilt from it
            release(self.members_bc)

    def as_graphframe(self):
        """Return the overlay as a GraphFrame (vertices = node state, edges = routing-table entries).

        Optional: needs the `graphframes` Python package and its JVM jar on the classpath
        (e.g. `spark-submit --packages io.graphframes:graphframes-spark4_2.13:<version>`).
        Nothing else in scribe-spark uses it.
        """
        hint = ("overlay.as_graphframe() needs the GraphFrames package: pip install graphframes-py and "
                "spark-submit --packages io.graphframes:graphframes-spark4_2.13:<version>; the state is also "
                "available without it as overlay.state (vertices) and overlay.routing_edges() (edges)")
        try:
            from graphframes import GraphFrame
        except ImportError as e:
            raise RuntimeError(f"{hint} (the Python package is missing: {e})") from None
        try:
            return GraphFrame(self.state, self.routing_edges())
        except Exception as e:   # the JVM side is missing: py4j reports it in several ways
            raise RuntimeError(f"{hint} (the JVM package is not on the classpath: "
                               f"{type(e).__name__})") from None


def _state_task(ring_bc: Broadcast, mode: str, seed: int, members_bc: Broadcast | None = None,
                chunk: int = 20_000) -> Callable:
    """mapInArrow task: ring positions -> the converged state of their nodes (`build_overlay`)."""
    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ring = ring_bc.value
        # the input is a range of ring positions: a task's nodes share prefix classes, so it
        # searches few classes instead of all of them
        positions = np.concatenate([b.column(0).to_numpy() for b in batches] or [np.empty(0, np.int64)])
        nodes = ring.order[positions.astype(np.int64)]
        for s in range(0, len(nodes), chunk):
            part = nodes[s:s + chunk]
            leaf, rt, nbr = _states(ring, part, mode, seed, None if members_bc is None else members_bc.value)
            yield pa.RecordBatch.from_arrays(
                [pa.array(part), list_array(leaf), list_array(rt), list_array(nbr)],
                schema=to_arrow_schema(STATE_SCHEMA))
    return _


@dataclass(frozen=True)
class Members:
    """The nodes an overlay is built of when others are absent (sorted), and their ring alone."""

    ids: np.ndarray
    ring: Ring

    @classmethod
    def of(cls, ring: Ring, absent: np.ndarray) -> "Members":
        """The nodes of `ring` but the `absent` ones."""
        ids_ = np.setdiff1d(np.arange(ring.n), np.asarray(absent, dtype=np.int64))
        return cls(ids_, kernels.members_ring(ring, ids_))

    def among(self, nodes: np.ndarray) -> np.ndarray:
        """Which of the nodes are members (a search of the sorted ids: no table as large as the ring)."""
        nodes = np.asarray(nodes, dtype=np.int64)
        if not len(self.ids):
            return np.zeros(len(nodes), dtype=bool)
        return self.ids[np.minimum(np.searchsorted(self.ids, nodes), len(self.ids) - 1)] == nodes

    def leaf_sets(self, ring: Ring, nodes: np.ndarray) -> list[np.ndarray]:
        """The nodes' converged leaf sets as `build_overlay` made them: the members' on their own ring, the
        others' on the whole `ring`."""
        nodes = np.asarray(nodes, dtype=np.int64)
        inside = self.among(nodes)
        out: list = [None] * len(nodes)
        mine, others = np.flatnonzero(inside), np.flatnonzero(~inside)
        if len(mine):
            for i, row in zip(mine, kernels.leaf_sets(self.ring, np.searchsorted(self.ids, nodes[mine]))):
                out[i] = self.ids[row]
        if len(others):
            for i, row in zip(others, kernels.leaf_sets(ring, nodes[others])):
                out[i] = row
        return out


def _states(ring: Ring, nodes: np.ndarray, mode: str, seed: int,
            members: Members | None) -> tuple[list, list, list]:
    """The nodes' converged (leaf, rt, nbr): on the whole ring, but for the `members`' on theirs alone."""
    def whole(part: np.ndarray) -> tuple[list, list, list]:
        return (kernels.leaf_sets(ring, part), kernels.routing_tables(ring, part, mode, seed),
                kernels.neighborhood_sets(ring, part))
    if members is None:
        return whole(nodes)
    inside = members.among(nodes)
    out: tuple[list, list, list] = ([None] * len(nodes), [None] * len(nodes), [None] * len(nodes))
    for where in (np.flatnonzero(inside), np.flatnonzero(~inside)):
        if not len(where):
            continue
        got = (kernels.member_states(members.ring, members.ids, nodes[where], mode, seed) if inside[where[0]]
               else whole(nodes[where]))
        for column, values in zip(out, got):
            for i, v in zip(where, values):
                column[i] = v
    return out


def state_partitions(sc: SparkContext, n: int) -> int:
    """Return the tasks that build an n-node state: about 100,000 nodes each, at least one per core."""
    return max(sc.defaultParallelism, n // 100_000 + 1)


def resident_partitions(sc: SparkContext, n: int) -> int:
    """Return the partitions of a built n-node state: about 500,000 nodes each, at least one per core.

    A routing superstep runs one task per partition of the state, each with its own Python round
    trip, so the cached state is cut more coarsely than the build (routing at 1M nodes is faster in
    2 partitions than in 11; the performance page has the figures).
    """
    return max(sc.defaultParallelism, -(-n // 500_000))


def build_overlay(spark: SparkSession, ring: Ring, mode: str = "proximity", seed: int = 0,
                  partitions: int | None = None, absent: np.ndarray | None = None) -> Overlay:
    """Build every node's converged state (leaf set, routing table, neighborhood set).

    mode is `proximity` (proximity neighbor selection) or `random`. With `absent` (node numbers), the
    other nodes get the state of the overlay they form without them, in which no state names an absent
    node, and each absent node the state it would have with every node in (what it comes back with).
    """
    if mode not in ("proximity", "random"):
        raise ValueError(f"mode: must be 'proximity' or 'random' (got {mode!r})")
    sc = spark.sparkContext
    ring_bc = share(sc, ring)
    members = Members.of(ring, absent) if absent is not None and len(absent) else None
    if members is not None and len(members.ids) <= ring.leaf_set:
        raise ValueError(f"absent: more than leaf_set = {ring.leaf_set} nodes must be present, "
                         f"not {len(members.ids)}")
    members_bc = None if members is None else share(sc, members)
    state = (spark.range(ring.n, numPartitions=partitions or state_partitions(sc, ring.n))
             .mapInArrow(_state_task(ring_bc, mode, seed, members_bc), STATE_SCHEMA)
             .repartition(partitions or resident_partitions(sc, ring.n), ID)
             .persist(bsp.cache_level(state_need(ring), bsp.memory_for_cache(spark))))
    bsp.rows(state)
    return Overlay(ring, ring_bc, state, mode, converged=members is None, members=members,
                   members_bc=members_bc)


def state_need(ring: Ring) -> int:
    """The bytes a ring's node state needs, about (the capacity check's lower bound)."""
    return state_bytes(ring.n, ring.b, ring.leaf_set, ring.neighborhood)


def with_distance(overlay: Overlay, df: DataFrame, a: str, b: str, out: str) -> DataFrame:
    """Return df with column `out` = proximity distance between nodes in columns a and b."""
    ring_bc = overlay.ring_bc
    schema = T.StructType(df.schema.fields + [T.StructField(out, T.DoubleType(), False)])

    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prox = ring_bc.value.prox
        for batch in batches:
            d = prox.dist(batch.column(a).to_numpy(), batch.column(b).to_numpy())
            yield pa.RecordBatch.from_arrays(batch.columns + [pa.array(d)], names=batch.schema.names + [out])
    return df.mapInArrow(_, schema)


def routing_edges(state: DataFrame, b: int) -> DataFrame:
    """Return the routing tables as GraphFrame edges (src, dst, row, col)."""
    cols = 1 << b
    return (state.select(F.col(ID).alias(SRC), F.posexplode("rt").alias("slot", DST))
            .where(F.col(DST) >= 0)
            .select(SRC, DST, (F.col("slot") / cols).cast("int").alias("row"),
                    (F.col("slot") % cols).cast("int").alias("col")))


def _route_batch(ring: Ring, col: dict, dead: np.ndarray | None = None) -> tuple:
    """Apply the routing rule to one Arrow batch of messages joined with node state.

    Returns (at, next, rule, timeouts, met_index, met_node); with `dead`, nodes try dead
    entries unknowingly and time out (kernels.route_step_timeouts), else no timeouts. A batch
    with an `entry` column (`entry_read`) has rt and nbr only where that entry is empty; a batch
    with no `leaf` column is at nodes whose leaf sets are windows of the ring (a converged overlay).
    """
    at = col[AT].to_numpy().astype(np.int64)
    if "leaf" in col:
        leaf = values_offsets(col["leaf"])
    else:
        leaf = kernels.leaf_window(ring, at).ravel(), np.arange(len(at) + 1) * ring.leaf_set
    args = (ring, as_u64(col["key_hi"]), as_u64(col["key_lo"]), at, *leaf,
            *values_offsets(col["rt"]), *values_offsets(col["nbr"]))
    if dead is not None:
        return (at, *kernels.route_step_timeouts(*args, dead))
    entry = col["entry"].to_numpy().astype(np.int64) if "entry" in col else None
    nxt, rule = kernels.route_step(*args, entry=entry)
    none = np.empty(0, np.int64)
    return at, nxt, rule, np.zeros(len(at), np.int32), none, none


def entry_read(leaf: bool = True) -> list[Column]:
    """Return the columns a routing superstep ships to Python from messages joined with node state.

    Each message's routing-table entry at its `slot` is read in the join (column `entry`, -1: empty or
    not known), and the node's rt and nbr rows go only where it is empty: the routing rule reads them
    only then (the rare case), and Arrow writes a list element by element. Without `leaf` the leaf
    sets stay behind, for a route that reads them from the ring. Unresolved columns, made once per
    loop and used by each superstep's select.
    """
    read = F.when(F.col(SLOT.name) >= 0, F.try_element_at("rt", F.col(SLOT.name) + 1))
    entry = F.coalesce(read, F.lit(-1))
    none = F.array().cast(NODES)
    unread = [F.when(entry >= 0, none).otherwise(F.col(c)).alias(c) for c in ("rt", "nbr")]
    leaf_sets = [F.col("leaf")] if leaf else []
    return [F.col(f.name) for f in MESSAGE_SCHEMA.fields] + [F.col(SLOT.name), *leaf_sets,
                                                             entry.alias("entry"), *unread]


def with_slots(messages: DataFrame, ring_bc: Broadcast) -> DataFrame:
    """Return messages with the `slot` their node reads for their key filled in (kernels.table_slot)."""
    schema = T.StructType(MESSAGE_SCHEMA.fields + [SLOT])
    out_schema = to_arrow_schema(schema)

    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ring = ring_bc.value
        for col in batch_columns(batches):
            key_hi, key_lo = as_u64(col["key_hi"]), as_u64(col["key_lo"])
            _, slot = kernels.table_slot(ring, key_hi, key_lo, col[AT].to_numpy())
            columns = [col[f.name] for f in MESSAGE_SCHEMA.fields] + [pa.array(slot.astype(np.int32))]
            yield pa.RecordBatch.from_arrays(columns, schema=out_schema)
    return messages.mapInArrow(_, schema)


def _step_task(ring_bc: Broadcast, dead_bc: Broadcast | None, settle: bool = False,
               ahead: bool = False) -> Callable:
    """The routing superstep's Python task; `settle` and `ahead` take leaf-set hops at once (see `route`)."""
    out_schema = to_arrow_schema(STEP_SCHEMA)

    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ring, dead = ring_bc.value, dead_bc.value if dead_bc is not None else None
        for col in batch_columns(batches):
            at, nxt, rule, timeouts, met_i, met_node = _route_batch(ring, col, dead)
            key_hi, key_lo = as_u64(col["key_hi"]), as_u64(col["key_lo"])
            stays = rule == kernels.DELIVERED
            done = stays | (rule == kernels.LEAF) if settle else stays
            src = col[SRC].to_numpy().astype(np.int64)
            hops = col["hops"].to_numpy().astype(np.int32) + (~stays).astype(np.int32)
            dist = col["distance"].to_numpy() + np.where(stays, 0.0, ring.prox.dist(at, nxt))
            if ahead:
                # a table hop's node takes its leaf-set step here too when the key is in its leaf set's range
                go = np.flatnonzero(~done)
                to = nxt[go]
                taken, final = kernels.leaf_rule(ring, key_hi[go], key_lo[go], to,
                                                 kernels.leaf_window(ring, to))
                go, to, final = go[taken], to[taken], final[taken]
                hops[go] += (final != to).astype(np.int32)
                dist[go] += ring.prox.dist(to, final)
                nxt[go], done[go] = final, True
            direct = np.where(done, ring.prox.dist(src, nxt), 0.0)
            # the slot the next node reads, for the messages still in flight (a delivered message drops
            # it); with dead nodes a node may forget entries, so none is read
            slot = np.full(len(at), -1, np.int64)
            if dead is None:
                live = np.flatnonzero(~done)
                slot[live] = kernels.table_slot(ring, key_hi[live], key_lo[live], nxt[live])[1]
            order = np.argsort(met_i, kind="stable")
            met_offs = np.searchsorted(met_i[order], np.arange(len(at) + 1)).astype(np.int32)
            met = pa.ListArray.from_arrays(pa.array(met_offs), pa.array(met_node[order].astype(np.int64)))
            yield pa.RecordBatch.from_arrays(
                [col["mid"], col[SRC], col["key_hi"], col["key_lo"], pa.array(nxt), pa.array(hops),
                 pa.array(dist), pa.array(col["rare"].to_numpy().astype(np.int32) + (rule == kernels.RARE)),
                 pa.array(col["timeouts"].to_numpy().astype(np.int32) + timeouts),
                 pa.array(slot.astype(np.int32)), pa.array(done), pa.array(direct), pa.array(at), met],
                schema=out_schema)
    return _


def next_hop(overlay: Overlay, messages: DataFrame) -> DataFrame:
    """Return messages with `next` (next node) and `delivered` (the message ends at `at`).

    `messages` needs columns key_hi, key_lo (128-bit key as two longs) and at; any other
    columns pass through. This is one superstep of Pastry routing for any application.
    """
    extra = [f for f in messages.schema.fields if f.name not in ("leaf", "rt", "nbr")]
    schema = T.StructType(extra + [T.StructField("next", T.LongType(), False),
                                   T.StructField("delivered", T.BooleanType(), False)])
    out_schema = to_arrow_schema(schema)
    names = [f.name for f in extra]
    ring_bc = overlay.ring_bc

    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ring = ring_bc.value
        for col in batch_columns(batches):
            _, nxt, rule, *_ = _route_batch(ring, col)
            arrays = [col[n] for n in names] + [pa.array(nxt), pa.array(rule == kernels.DELIVERED)]
            yield pa.RecordBatch.from_arrays(arrays, schema=out_schema)
    joined = messages.join(overlay.state, messages[AT] == overlay.state[ID]).drop(ID)
    return joined.mapInArrow(_, schema)


def route(overlay: Overlay, messages: DataFrame,
          max_supersteps: int | None = None, dead: np.ndarray | None = None,
          repair: Callable[[DataFrame, DataFrame], DataFrame] | None = None) -> DataFrame:
    """Route all messages to their keys in supersteps, hop by hop; return the delivered messages.

    In a `converged` overlay with no `dead` nodes and no `repair`, a message that a leaf set
    forwards is delivered in that same superstep, at the node it goes to: that node is the key's
    numerically closest (a converged leaf set holds every node between its ends) and would deliver
    it with no further hop. A message that a routing-table or rare-case hop brings to a node whose
    leaf set holds the key in range takes that leaf-set step in the same superstep too: on a ring of
    more than |L| nodes a converged leaf set is a window of the broadcast ring, read there, and the
    leaf sets are not shipped with the messages at all. The delivered rows are the same; routes end
    up to two supersteps sooner.

    `messages` has MESSAGE_SCHEMA (at = the node the message starts from). The result has
    columns mid, src, key_hi, key_lo, dest, hops, distance, direct (distance of the one
    direct hop src -> dest), rare (hops that used the rare-case rule) and timeouts.

    With `dead` (a mask over node numbers), the state may still name failed nodes: a node
    that picks one times out and picks again (kernels.route_step_timeouts). With `repair`
    too, after each superstep `repair(state, met)` returns the state to use next, where
    `met` holds (id, dead) for every dead node a node tried in that superstep: Pastry's lazy
    repair of the entries that routes find dead. `repair` must return a materialized frame
    (a checkpoint or a cache): the superstep's frames are released when the loop ends.
    """
    limit = max_supersteps or overlay.ring.route_bound
    dead_bc = share(overlay.state.sparkSession.sparkContext, dead) if dead is not None else None
    settle = overlay.converged and dead is None and repair is None
    # a converged leaf set is a window of the ring, unless the ring is too small for full leaf sets
    ahead = settle and not kernels.whole_ring(overlay.ring, overlay.ring.n)
    task = _step_task(overlay.ring_bc, dead_bc, settle, ahead)
    state = overlay.state
    shipped = entry_read(leaf=not ahead)

    def hop(inflight: DataFrame, n: int) -> DataFrame:
        """Every message takes one hop from the node it is at (`done`: it is at its key's node)."""
        joined = bsp.join_static(inflight, n, state, overlay.ring.n, AT, ID)
        return joined.select(*shipped).mapInArrow(task, STEP_SCHEMA)

    def on(stepped: DataFrame) -> DataFrame:
        return stepped.where(~F.col("done")).drop("done", "direct", "prev", "met")

    def delivered(stepped: DataFrame) -> DataFrame:
        return stepped.where("done").drop(*STEP_ONLY)

    def forward(inflight: DataFrame, k: int, n: int) -> bsp.Split:
        """Forward every message one hop; deliver those at their key's node."""
        return bsp.Split(hop(inflight, n), on, {"delivered": delivered})

    cuts = bsp.Carry()

    def forward_and_repair(inflight: DataFrame, k: int, n: int) -> bsp.Superstep:
        """As `forward`; then the nodes that met dead entries repair them (Pastry's lazy repair)."""
        nonlocal state
        stepped = cuts.cut(hop(inflight, n))
        state = repair(state,
                       stepped.select(F.col("prev").alias(ID), F.explode("met").alias("dead")).distinct())
        return bsp.Superstep(on(stepped), {"delivered": delivered(stepped)})

    start = messages.select(*[f.name for f in MESSAGE_SCHEMA.fields])
    # with dead nodes the slots stay unknown (-1), so every superstep ships the whole tables
    start = start.withColumn(SLOT.name, F.lit(-1)) if dead is not None else with_slots(start, overlay.ring_bc)
    out = bsp.run("route", start, forward if repair is None else forward_and_repair,
                  limit, carry=cuts).emitted.get("delivered")
    if out is None:
        empty = local_frame(messages.sparkSession, to_arrow_schema(STEP_SCHEMA).empty_table(), STEP_SCHEMA)
        return empty.drop(*STEP_ONLY).withColumnRenamed(AT, "dest")
    return out.withColumnRenamed(AT, "dest")


LOOKUP_BLOCK = 1 << 20    # lookups drawn from one stream


def lookup_block(n: int, count: int, block: int, size: int, seed: int, purpose: int | None,
                 scope: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Block `block` of `size` lookups of `count` in an n-node ring: sources and destinations. Block 0
    draws from the stream all lookups were drawn from before they came in blocks, so that a draw of one
    block is unchanged; each later block from a stream of its own."""
    m = min(size, count - block * size)
    if block and purpose is None:
        raise ValueError("lookups of more than one block need a purpose of their own")
    later = (*scope, purpose, block)   # a purpose of their own: [seed, *scope, block, purpose] may be taken
    rng = stream(seed, purpose, *scope) if block == 0 else stream(seed, Purpose.LOOKUP_BLOCKS, *later)
    src = rng.integers(0, n, size=m)
    return src, (src + rng.integers(1, n, size=m)) % n


def lookups(spark: SparkSession, ring: Ring, count: int, seed: int, purpose: int | None,
            *scope: int) -> DataFrame:
    """Return `count` lookups between random distinct node pairs (key = destination's id), drawn from the
    run's streams of `purpose` and `scope` in blocks of LOOKUP_BLOCK (`lookup_block`): one block on the
    driver, more by Spark tasks that read the ids from the shared ring, so that the driver holds none."""
    n, size = ring.n, LOOKUP_BLOCK
    blocks = -(-count // size)
    if blocks <= 1:
        src, dst = lookup_block(n, count, 0, size, seed, purpose, scope)
        return messages_frame(spark, src, ring.hi[dst], ring.lo[dst])
    ring_bc = share(spark.sparkContext, ring)

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        r = ring_bc.value
        for batch in batches:
            for block in batch.column(0).to_numpy():
                src, dst = lookup_block(n, count, int(block), size, seed, purpose, scope)
                yield _messages(int(block) * size, src, r.hi[dst], r.lo[dst]).to_batches()[0]
    return spark.range(blocks, numPartitions=blocks).mapInArrow(task, MESSAGE_SCHEMA)


def _messages(first: int, src: np.ndarray, key_hi: np.ndarray, key_lo: np.ndarray) -> pa.Table:
    """Routing messages numbered from `first`, starting at nodes `src` with 128-bit keys (hi, lo)."""
    count = len(src)
    return pa.table({
        "mid": pa.array(np.arange(first, first + count, dtype=np.int64)),
        SRC: pa.array(np.asarray(src, dtype=np.int64)),
        "key_hi": pa.array(np.asarray(key_hi, dtype=np.uint64).view(np.int64)),
        "key_lo": pa.array(np.asarray(key_lo, dtype=np.uint64).view(np.int64)),
        AT: pa.array(np.asarray(src, dtype=np.int64)),
        "hops": pa.array(np.zeros(count, dtype=np.int32)),
        "distance": pa.array(np.zeros(count, dtype=np.float64)),
        "rare": pa.array(np.zeros(count, dtype=np.int32)),
        "timeouts": pa.array(np.zeros(count, dtype=np.int32)),
    }, schema=to_arrow_schema(MESSAGE_SCHEMA))


def messages_frame(spark: SparkSession, src: np.ndarray, key_hi: np.ndarray, key_lo: np.ndarray) -> DataFrame:
    """Return routing messages starting at nodes `src` with 128-bit keys (hi, lo)."""
    return local_frame(spark, _messages(0, src, key_hi, key_lo), MESSAGE_SCHEMA)
