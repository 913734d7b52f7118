"""Silent node failures and their repair (docs/model.md, Pastry), as supersteps over the node state.

Failure model: a set of nodes stops at once. Their rows leave the state frame; the survivors'
state still names them. A node that forwards to a dead node times out, forgets that entry and
applies the routing rule again (the rare case if the table has no other entry):
`overlay.route(..., dead=mask)` models this and counts the timeouts. `without_dead` instead
gives every node a state with all dead entries already dropped (failures known everywhere).

Repair, counting messages:
- leaf sets (eager): a node that lost leaf-set members on a side asks the farthest live member
  on that side for its leaf set (request + reply) and keeps the |L|/2 nearest live ids per side
  among what it knows; repeated as supersteps until no node is short, or until a superstep
  changes no leaf set: then none ever will (the same questions get the same answers), as when
  |L|/2 or more adjacent members failed, the case the Pastry paper names as the one its
  leaf-set repair cannot handle; the nodes left short are logged as a warning.
  Neighborhood sets drop their dead members at the same time (Pastry probes M periodically; P3
  measures routing, which uses M only in the rare case).
- routing tables: for a dead entry (r, c) the node asks the live entries of row r, nearest
  first, for their (r, c) entry until one names a live node (request + reply each); if none
  does, it asks the entries of row r + 1 the same way; if none does either, the entry stays
  empty. `LazyRepair` does this as Pastry does, only for the entries routes find dead, after
  each routing superstep; `repair` does it for every dead entry at once (eager), so its message
  count is what repairing everything costs. Contacts that are dead are skipped at no cost, and
  a reply that names a dead node counts as no answer (the node would try it and time out).
"""
from __future__ import annotations

import contextlib
import logging
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.broadcast import Broadcast
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from scribe_spark import bsp
from scribe_spark.pastry import kernels
from scribe_spark.pastry.kernels import Ring
from scribe_spark.pastry.overlay import ID, NODES, STATE_SCHEMA, Overlay, with_distance
from scribe_spark.spark.arrow import batch_columns, list_array, local_frame, values_offsets
from scribe_spark.spark.shared import release, share

_log = logging.getLogger(__name__)

# every repair question is one remote procedure call: a request and its reply (the Pastry paper counts RPCs)
MESSAGES_PER_RPC = 2


def repair_bound(ring: Ring, members: np.ndarray, dead: np.ndarray) -> int:
    """Eager leaf-set repair's superstep bound: ceil(h (D + 1) / (h - D)) + 1 (README, "How it works").

    h = |L|/2 and D is the longest run of adjacent failed `members` shorter than h. A node short on
    a side asks the farthest live member it knows there, whose leaf set reaches h members further,
    the last live one at most D before that end: each superstep moves the node's reach at least
    h - D members, and its h-th live member is at most h (D + 1) away, which it knew h - D of
    before the first: ceil(h (D + 1) / (h - D)) - 1 supersteps mend every node that can be mended
    (if the leaf sets were right before the failure). A loop with nodes that cannot be mended
    ends with a superstep that changes nothing, after at least one that drops dead members: + 2.
    """
    h = ring.leaf_set // 2
    lengths = kernels.member_runs(ring, members, dead)
    d = int(lengths[lengths < h].max(initial=0))
    return -(-h * (d + 1) // (h - d)) + 1


def leaf_sides(ring: Ring, me: int, cand) -> tuple[list[int], list[int]]:
    """Split distinct candidate nodes into (smaller side, larger side), each sorted nearest first.

    Callers pass a leaf set's few dozen candidates, one node at a time: one array lookup, then plain
    Python (NumPy's per-call cost exceeds the work).
    """
    nodes = np.asarray(cand, dtype=np.int64)
    n = ring.n
    cw = ((ring.pos[nodes] - ring.pos[me]) % n).tolist()   # positions clockwise (towards larger ids)
    pairs = list(zip(cw, nodes.tolist()))
    larger = [v for _c, v in sorted((c, v) for c, v in pairs if c <= n // 2)]
    smaller = [v for _c, v in sorted((n - c, v) for c, v in pairs if c > n // 2)]
    return smaller, larger


def leaf_set_layout(ring: Ring, me: int, cand: np.ndarray, n_live: int) -> np.ndarray:
    """Return a leaf set in the kernels' layout (L/2 smaller then L/2 larger, nearest first).

    A side with fewer than L/2 live nodes is padded with its farthest one (or `me`), so the
    range test of the routing rule still sees the farthest live member on each side.
    """
    half = ring.leaf_set // 2
    cand = np.unique(cand[cand != me])
    if kernels.whole_ring(ring, n_live):      # the whole (small) ring, short of a full leaf set: no sides
        return cand
    smaller, larger = leaf_sides(ring, me, cand)
    smaller, larger = smaller[:half], larger[:half]

    def pad(side: np.ndarray) -> np.ndarray:
        return np.concatenate([side, np.full(half - len(side), side[-1] if len(side) else me)])

    return np.concatenate([pad(smaller), pad(larger)]).astype(np.int64)


def state_batch(me, leaf, rt, nbr) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(me, pa.int64()), list_array(leaf), list_array(rt),
                                       list_array(nbr)],
                                      schema=to_arrow_schema(STATE_SCHEMA))


def _survivors(ring_bc: Broadcast, dead_bc: Broadcast) -> tuple[Ring, np.ndarray, int]:
    """Return what a repair task reads from its broadcasts: the ring, the dead mask, the live count."""
    dead = dead_bc.value
    return ring_bc.value, dead, int((~dead).sum())


def _leaf_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[dict, np.ndarray, list[np.ndarray]]]:
    """Yield per Arrow batch of node rows: its columns, the node ids and each node's leaf set."""
    for col in batch_columns(batches):
        me = col[ID].to_numpy().astype(np.int64)
        lv, lof = values_offsets(col["leaf"])
        yield col, me, [lv[lof[i]:lof[i + 1]] for i in range(len(me))]


def _clean_task(ring_bc: Broadcast, dead_bc: Broadcast) -> Callable:
    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ring, dead, n_live = _survivors(ring_bc, dead_bc)
        for col, me, leaves in _leaf_batches(batches):
            rv, ro = values_offsets(col["rt"])
            nv, no = values_offsets(col["nbr"])
            rv = np.where((rv >= 0) & dead[np.maximum(rv, 0)], -1, rv)
            leaf, rt, nbr = [], [], []
            for i, (m, own) in enumerate(zip(me, leaves)):
                leaf.append(leaf_set_layout(ring, m, own[~dead[own]], n_live))
                rt.append(rv[ro[i]:ro[i + 1]])
                x = nv[no[i]:no[i + 1]]
                nbr.append(x[~dead[x]])
            yield state_batch(me, leaf, rt, nbr)
    return _


def _dead_frame(spark, dead: np.ndarray) -> DataFrame:
    """The dead nodes' numbers as a frame (column `dead`) to broadcast-join with."""
    return F.broadcast(local_frame(spark, pd.DataFrame({"dead": np.flatnonzero(dead).astype(np.int64)}),
                                   "dead long"))


def _live_rows(state: DataFrame, dead: np.ndarray) -> DataFrame:
    """The state's rows of live nodes, in the state's order and partitions.

    A join, not a filter on a list: a list of the dead would be a literal of the plan, shipped with
    every task; the broadcast join keeps the state's side as it is."""
    dead_df = _dead_frame(state.sparkSession, dead)
    return state.join(dead_df, state[ID] == dead_df.dead, "left_anti")


def _without_dead_neighbours(state: DataFrame, dead_bc: Broadcast) -> DataFrame:
    """The state with the dead left out of every neighbourhood set, in its order (read from the mask)."""
    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        dead = dead_bc.value
        for col in batch_columns(batches):
            nv, no = values_offsets(col["nbr"])
            nbr = [x[~dead[x]] for x in (nv[no[i]:no[i + 1]] for i in range(len(no) - 1))]
            yield pa.RecordBatch.from_arrays([col[ID], col["leaf"], col["rt"], list_array(nbr)],
                                             schema=to_arrow_schema(STATE_SCHEMA))
    return state.select(ID, "leaf", "rt", "nbr").mapInArrow(_, STATE_SCHEMA)


def without_dead(overlay: Overlay, dead: np.ndarray) -> Overlay:
    """Return the survivors' state with every dead entry skipped (routing without repair)."""
    dead_bc = share(overlay.state.sparkSession.sparkContext, dead)
    live_rows = _live_rows(overlay.state, dead)
    state = live_rows.mapInArrow(_clean_task(overlay.ring_bc, dead_bc), STATE_SCHEMA).persist()
    bsp.rows(state)
    return Overlay(overlay.ring, overlay.ring_bc, state, overlay.mode)


def _leaf_requests(ring_bc: Broadcast, dead_bc: Broadcast) -> Callable:
    schema = pa.schema([(ID, pa.int64(), False), ("contact", pa.int64(), False)])

    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ring, dead, n_live = _survivors(ring_bc, dead_bc)
        half = ring.leaf_set // 2
        for _col, me, leaves in _leaf_batches(batches):
            out_me, out_c = [], []
            for m, leaf in zip(me, leaves):
                if kernels.whole_ring(ring, n_live) or len(leaf) < ring.leaf_set:
                    continue
                # the layout: L/2 smaller then L/2 larger, nearest first (padding repeats the farthest)
                sides = [[x for x in dict.fromkeys(part.tolist()) if not dead[x] and x != m]
                         for part in (leaf[:half], leaf[half:])]
                for side, other in ((sides[0], sides[1]), (sides[1], sides[0])):
                    if len(side) < half and (side or other):
                        out_me.append(m)   # ask the farthest live member on that side (else on the other)
                        out_c.append(side[-1] if side else other[-1])
            yield pa.RecordBatch.from_arrays([pa.array(out_me, pa.int64()), pa.array(out_c, pa.int64())],
                                             schema=schema)
    return _


NEW_LEAF = T.StructType([T.StructField(ID, T.LongType(), False), T.StructField("new_leaf", NODES, False)])
# a merge that also names the senders to answer: those that pushed a leaf set and are not in new_leaf
ANSWERED = T.StructType([*NEW_LEAF.fields, T.StructField("changed", T.BooleanType(), False),
                         T.StructField("answer_to", NODES, False)])


def leaf_merge_task(ring_bc: Broadcast, dead_bc: Broadcast, answering: bool = False) -> Callable:
    """mapInArrow task: (id, leaf, cand) -> NEW_LEAF, the nodes whose leaf set the candidates change.

    With `answering` the input also holds `from`, the nodes that pushed their leaf sets, and the
    output is ANSWERED: also the nodes that must answer one, with those senders in `answer_to`.
    """
    schema = to_arrow_schema(ANSWERED if answering else NEW_LEAF)

    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ring, dead, n_live = _survivors(ring_bc, dead_bc)
        for col, me, leaves in _leaf_batches(batches):
            cv, co = values_offsets(col["cand"])
            fv, fo = values_offsets(col["from"]) if answering else (None, None)
            ids, out, changed, answer_to = [], [], [], []
            for i, (m, leaf) in enumerate(zip(me, leaves)):
                cand = np.concatenate([leaf, cv[co[i]:co[i + 1]]])
                new = leaf_set_layout(ring, m, cand[~dead[cand]], n_live)
                moved = not np.array_equal(new, leaf)
                to = np.setdiff1d(fv[fo[i]:fo[i + 1]], new) if answering else ()
                if moved or len(to):
                    ids.append(m)
                    out.append(new)
                    changed.append(moved)
                    answer_to.append(to)
            arrays = [pa.array(ids, pa.int64()), list_array(out)]
            if answering:
                arrays += [pa.array(changed, pa.bool_()), list_array(answer_to)]
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)
    return _


def with_new_leaves(state: DataFrame, merged: DataFrame) -> DataFrame:
    """The state with the leaf sets in `merged` (NEW_LEAF) in place of the nodes' own, where it has one."""
    return (state.join(merged, ID, "left")
            .select(ID, F.coalesce("new_leaf", "leaf").alias("leaf"), "rt", "nbr"))


def repair_leaf_sets(overlay: Overlay, dead: np.ndarray) -> tuple[DataFrame, int]:
    """Eager leaf-set repair as supersteps; return (survivors' state, messages sent)."""
    dead_bc = share(overlay.state.sparkSession.sparkContext, dead)
    members = overlay.state.select(ID).toPandas()[ID].to_numpy()
    carry = bsp.Carry()
    carry.keep("state", _live_rows(overlay.state, dead))
    messages = short = 0

    def requests(state: DataFrame) -> DataFrame:
        """A node whose leaf set names a dead one asks the farthest live one on that side for its leaf set."""
        return state.select(ID, "leaf").mapInArrow(_leaf_requests(overlay.ring_bc, dead_bc),
                                                   "id long, contact long")

    def repair(inflight: DataFrame, k: int, n: int) -> bsp.Superstep:
        """Contacts reply with their leaf sets; each asker merges them, asking again if need be."""
        nonlocal messages, short
        messages += MESSAGES_PER_RPC * n   # a request and its reply
        state = carry["state"]
        contacts = state.select(F.col(ID).alias("contact"), F.col("leaf").alias("cleaf"))
        replies = (inflight.join(contacts, "contact").groupBy(ID)
                   .agg(F.flatten(F.collect_list(F.concat(F.array("contact"), "cleaf"))).alias("cand")))
        merge = leaf_merge_task(overlay.ring_bc, dead_bc)
        merged = carry.cut(replies.join(state.select(ID, "leaf"), ID).mapInArrow(merge, NEW_LEAF))
        if bsp.rows(merged) == 0:   # nothing learnt: asking again would get the same answers
            short = bsp.rows(inflight.select(ID).distinct())
            return bsp.Superstep(inflight.limit(0))
        state = carry.keep("state", with_new_leaves(state, merged), unsized=True)
        return bsp.Superstep(requests(state))

    bsp.run("leaf-set repair", requests(carry["state"]), repair, repair_bound(overlay.ring, members, dead),
            unit="requests", carry=carry)
    if short:
        _log.warning(f"leaf-set repair: {short} nodes keep fewer than |L|/2 live members on a side, "
                     f"which Pastry's leaf-set repair cannot mend (e.g. {overlay.ring.leaf_set // 2} or more "
                     "adjacent nodes failed)")
    release(dead_bc)   # the state is cut: no task reads the mask again
    return carry["state"], messages


def _slots(state: DataFrame, width: int) -> DataFrame:
    """Return the routing-table slots (id, pos, entry, row)."""
    slots = state.select(ID, F.posexplode("rt").alias("pos", "entry"))
    return slots.withColumn("row", (F.col("pos") / width).cast("int"))


def repair_routing_tables(overlay: Overlay, state: DataFrame, dead: np.ndarray,
                          met: DataFrame | None = None) -> tuple[DataFrame, dict]:
    """Replace dead routing-table entries by asking row r (then row r + 1) entries, nearest first.

    Repairs every dead entry, or with `met` (id, dead) only the entries where node `id` found
    `dead`. Returns (state with repaired tables, counts: holes, repaired, messages)."""
    spark = state.sparkSession
    dead_df = _dead_frame(spark, dead)
    slots = _slots(state, 1 << overlay.ring.b).localCheckpoint()
    if met is None:
        holes = slots.join(dead_df, slots.entry == dead_df.dead)
    else:
        holes = slots.join(met, (slots[ID] == met[ID]) & (slots.entry == met.dead)).drop(met[ID])
    holes = holes.select(ID, "pos", "row").localCheckpoint()
    live_slots = slots.join(dead_df, slots.entry == dead_df.dead, "left_anti").where(F.col("entry") >= 0)
    n_holes = bsp.rows(holes)
    messages = 0
    cuts = bsp.Carry()

    def ask(todo: DataFrame, k: int, n: int) -> bsp.Superstep:
        """Superstep k asks row r + k - 1's live entries for their entry at the hole's slot, nearest first."""
        nonlocal messages
        shift = k - 1
        contacts = (todo.join(live_slots.select(ID, (F.col("row") - shift).alias("row"),
                                                F.col("pos").alias("cpos"),
                                                F.col("entry").alias("contact")), [ID, "row"])
                    .where(F.col("cpos") != F.col("pos")))
        asked = (contacts.join(slots.select(F.col(ID).alias("contact"), "pos", F.col("entry").alias("cand")),
                               ["contact", "pos"], "left")
                 .withColumn("ok",
                             F.col("cand").isNotNull() & (F.col("cand") >= 0) & (F.col("cand") != F.col(ID))))
        asked = asked.join(dead_df, asked.cand == dead_df.dead, "left").withColumn(
            "ok", F.col("ok") & F.col("dead").isNull()).drop("dead")
        asked = cuts.cut(with_distance(overlay, asked, ID, "contact", "cdist"))
        first = asked.groupBy(ID, "pos").agg(F.min(F.when(F.col("ok"), F.col("cdist"))).alias("first_ok"),
                                             F.min_by(F.when(F.col("ok"), F.col("cand")),
                                                      F.when(F.col("ok"), F.col("cdist"))).alias("new_entry"))
        counted = asked.join(first, [ID, "pos"]).where(
            F.col("first_ok").isNull() | (F.col("cdist") <= F.col("first_ok")))
        messages += MESSAGES_PER_RPC * bsp.rows(counted)   # each contact asked until one had a live candidate
        found = cuts.cut(first.where(F.col("new_entry").isNotNull()).select(ID, "pos", "new_entry"))
        return bsp.Superstep(todo.join(found, [ID, "pos"], "left_anti"), {"found": found})

    # ask row r, then row r + 1: two rounds by design; holes neither fills stay empty
    with contextlib.nullcontext() if met is None else bsp.quiet():
        done = bsp.run("routing-table repair", holes, ask, 2, unit="holes", rounds=2, carry=cuts)
    fix = done.emitted.get("found",
                           holes.select(ID, "pos", F.lit(None).cast("long").alias("new_entry")).limit(0))
    upd = (holes.join(fix, [ID, "pos"], "left")
           .select(ID, "pos", F.coalesce("new_entry", F.lit(-1)).alias("entry")).toPandas())
    repaired = int((upd.entry >= 0).sum())
    fixed = _set_entries(state, upd)
    for frame in (slots, holes, done.left, fix):   # cut here and read by nothing after the update
        bsp.release(frame)
    return fixed, {"holes": n_holes, "repaired": repaired, "messages": messages}


def _set_entries(state: DataFrame, upd: pd.DataFrame) -> DataFrame:
    """Return the state with routing-table slots (id, pos) set to `entry`.

    The updates are broadcast to a map over the state rather than joined: a join's size
    estimate multiplies its inputs', and a local checkpoint keeps it, so a state re-joined in
    every superstep would have its estimate grow without bound (and Spark's planner with it).
    """
    upd = upd.sort_values([ID, "pos"])
    upd_bc = state.sparkSession.sparkContext.broadcast(
        (upd[ID].to_numpy(np.int64), upd.pos.to_numpy(np.int64), upd.entry.to_numpy(np.int64)))

    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        u_id, u_pos, u_entry = upd_bc.value
        for col in batch_columns(batches):
            me = col[ID].to_numpy().astype(np.int64)
            rv, ro = values_offsets(col["rt"])
            first, end = np.searchsorted(u_id, me), np.searchsorted(u_id, me, side="right")
            for i in np.flatnonzero(end > first):
                rv[ro[i] + u_pos[first[i]:end[i]]] = u_entry[first[i]:end[i]]
            rt = pa.ListArray.from_arrays(pa.array(ro.astype(np.int32)), pa.array(rv.astype(np.int32)))
            yield pa.RecordBatch.from_arrays([col[ID], col["leaf"], rt, col["nbr"]],
                                             schema=to_arrow_schema(STATE_SCHEMA))
    return state.select(ID, "leaf", "rt", "nbr").mapInArrow(_, STATE_SCHEMA).localCheckpoint()


def repair(overlay: Overlay, dead: np.ndarray) -> tuple[Overlay, dict]:
    """Repair leaf sets, then every dead routing-table entry (eager); return the new overlay and counts."""
    state, leaf_msgs = repair_leaf_sets(overlay, dead)
    state, rt = repair_routing_tables(overlay, state, dead)
    repaired = Overlay(overlay.ring, overlay.ring_bc, state, overlay.mode)
    out = without_dead(repaired, dead)
    return out, {"leaf_messages": leaf_msgs, "table_messages": rt["messages"], "table_holes": rt["holes"],
                 "table_repaired": rt["repaired"]}


class LazyRepair:
    """Pastry's repair after failures: leaf sets at once, routing-table entries when routes find them dead.

    `LazyRepair(overlay, dead)` repairs the leaf sets; `.overlay` then still holds the dead
    routing-table entries (the nodes do not know them). Route with
    `route(lazy.overlay, msgs, dead=dead, repair=lazy)`: after each superstep the entries that
    routes found dead are repaired (see the module docstring) and `.overlay` follows. `.counts`
    holds leaf_messages, table_holes (dead entries in the survivors' tables at the start) and,
    growing as routes run, table_met (entries found dead), table_repaired and table_messages.
    """

    def __init__(self, overlay: Overlay, dead: np.ndarray):
        state, leaf_msgs = repair_leaf_sets(overlay, dead)
        spark = state.sparkSession
        dead_bc = share(spark.sparkContext, dead)
        state = _without_dead_neighbours(state, dead_bc).localCheckpoint()   # eager: the mask is read
        release(dead_bc)
        dead_df = _dead_frame(spark, dead)
        slots = _slots(state, 1 << overlay.ring.b)
        holes = bsp.rows(slots.join(dead_df, slots.entry == dead_df.dead, "left_semi"))
        self.overlay = Overlay(overlay.ring, overlay.ring_bc, state, overlay.mode)
        self.dead = dead
        self.counts = {"leaf_messages": leaf_msgs, "table_holes": holes, "table_met": 0, "table_repaired": 0,
                       "table_messages": 0}

    def __call__(self, state: DataFrame, met: DataFrame) -> DataFrame:
        """Repair the entries in `met` (id, dead) of `state`; return the new state."""
        if met.isEmpty():
            return state
        fixed, c = repair_routing_tables(self.overlay, state, self.dead, met=met)
        if state is self.overlay.state:   # cut by an earlier repair or by __init__; nothing reads it now
            bsp.release(state)
        self.counts["table_met"] += c["holes"]
        self.counts["table_repaired"] += c["repaired"]
        self.counts["table_messages"] += c["messages"]
        _log.info(f"lazy routing-table repair: {c['holes']} entries found dead, {c['repaired']} replaced, "
                 f"{c['messages']} messages")
        self.overlay = Overlay(self.overlay.ring, self.overlay.ring_bc, fixed, self.overlay.mode)
        return fixed
