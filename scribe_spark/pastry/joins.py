"""Pastry node joins as supersteps (docs/model.md, Pastry): an overlay grown one batch of newcomers at a time.

For each newcomer X of a batch, all at once:
1. its contact A is the member nearest to X by proximity;
2. a JOIN message routes from A to X's id (supersteps over the members' state), recording
   the route Z_0 = A, Z_1, ..., Z_k;
3. X's routing-table row i comes from Z_i's row i (rows past k from Z_k), keeping for each
   entry the nearest candidate that is valid for X (Z_i itself is a candidate); X's leaf set
   comes from Z_k's, its neighborhood set from A's;
4. X sends its state to every node it names; each of them takes X into its leaf set,
   routing table (empty entry, or X nearer) or neighborhood set where X fits.
Newcomers of the same batch do not know each other yet, so a leaf-set exchange runs as
supersteps, as Pastry's leaf-set maintenance would: each node sends its leaf set to its
leaf-set members, who keep the nearest ones; a node that gets a leaf set from a node it does
not count among its own leaf-set members answers with its leaf set (the sender is missing
nodes between the two of them; an answer is not answered). Every node sends again while any
leaf set changes, and the exchange ends when none changes and no answer is in flight. Without
the answers, a run of more than about |L| newcomers between two old members settles with
wrong leaf sets: the old members keep only the |L|/2 newcomers nearest to them, and the
newcomers further in never hear of each other.
5. Optionally (`improve`), the Pastry paper's second phase: each newcomer asks the nodes of
   its routing-table row i for their row i (`rows`), then every node in its table for its
   whole table (`tables`), and keeps the nearest node per slot. Simplified from the paper: all
   rows are asked at once, from the tables the route gave, and the neighborhood set is not asked.
Every transfer counts as one message; an exchange counts a request and a reply per node asked.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from scribe_spark import bsp, ids
from scribe_spark.columns import AT
from scribe_spark.pastry import kernels
from scribe_spark.pastry.failures import (
    ANSWERED,
    MESSAGES_PER_RPC,
    leaf_merge_task,
    leaf_set_layout,
    state_batch,
    with_new_leaves,
)
from scribe_spark.pastry.kernels import Ring
from scribe_spark.pastry.overlay import ID, STATE_SCHEMA, Overlay, messages_frame, next_hop
from scribe_spark.spark.arrow import batch_columns, local_frame, values_offsets
from scribe_spark.spark.shared import share
from scribe_spark.topology import Proximity

_log = logging.getLogger(__name__)


def sub_ring(ring: Ring, members: np.ndarray) -> Ring:
    """Return the ring of `members` only (numbered 0..len-1 in the order given)."""
    p = ring.prox
    prox = Proximity(p.model, None if p.coords is None else p.coords[members],
                     None if p.site is None else p.site[members], p.site_delay, p.lan)
    return Ring(ring.hi[members], ring.lo[members], ring.b, ring.leaf_set, ring.neighborhood, prox)


def exchange_bound(ring: Ring, members: np.ndarray, xs: np.ndarray) -> int:
    """The leaf-set exchange's superstep bound after `xs` join `members`: 2 ceil(g / h) + 2 (README).

    g is the most newcomers between two consecutive members and h = |L|/2. The nodes that know
    their true leaf sets spread into such a run from the members at its ends (whose leaf sets
    were right before the batch and who heard from every newcomer of the run): the first push
    teaches each of them the h newcomers next to it; a newcomer further in that pushes to one of
    them is answered, then pushes to the newcomers it learnt of, so the right ones spread h
    further. `bench/leaf_exchange_model.py` never took more than ceil(g / h) + 2 over 275 batch
    shapes; the bound allows twice that.
    """
    newcomer = np.zeros(ring.n, dtype=bool)
    newcomer[xs] = True
    runs = kernels.member_runs(ring, np.concatenate([members, xs]), newcomer)
    return 2 * -(-int(runs.max(initial=0)) // (ring.leaf_set // 2)) + 2


def initial_overlay(spark: SparkSession, ring: Ring, members: np.ndarray) -> Overlay:
    """Converged state of the first members, in the full ring's node numbers."""
    sub = sub_ring(ring, members)
    local = np.arange(len(members))

    def to_full(lists: list) -> list[np.ndarray]:
        return [members[np.asarray(x, dtype=np.int64)] if len(x) else np.asarray(x, dtype=np.int64)
                for x in lists]

    rt = [np.where(np.asarray(r) >= 0, members[np.maximum(np.asarray(r, dtype=np.int64), 0)], -1)
          for r in kernels.routing_tables(sub, local, "proximity", 0)]
    batch = state_batch(members.astype(np.int64), to_full(kernels.leaf_sets(sub, local)), rt,
                         to_full(kernels.neighborhood_sets(sub, local)))
    state = local_frame(spark, pa.Table.from_batches([batch]), STATE_SCHEMA).persist()
    bsp.rows(state)
    return Overlay(ring, share(spark.sparkContext, ring), state, "proximity")


def _valid(ring: Ring, x: int, cand: np.ndarray, r: int, c: int) -> np.ndarray:
    """Which candidates may fill X's routing-table entry (r, c): r shared digits and digit c at r."""
    n = len(cand)
    pre = ids.shared_prefix_digits(ring.hi[cand], ring.lo[cand], np.full(n, ring.hi[x]),
                                   np.full(n, ring.lo[x]), ring.b)
    return (pre == r) & (ids.digit(ring.hi[cand], ring.lo[cand], r, ring.b) == c) & (cand != x)


def _entry_of(ring: Ring, me: int, y: np.ndarray) -> np.ndarray:
    """Routing-table slot of node(s) y in me's table: r * 2^b + digit r of y, r = shared digits."""
    n = len(y)
    r = ids.shared_prefix_digits(ring.hi[y], ring.lo[y], np.full(n, ring.hi[me]), np.full(n, ring.lo[me]),
                                 ring.b)
    r = np.minimum(r, ring.digits - 1)
    return r * (1 << ring.b) + ids.digit(ring.hi[y], ring.lo[y], r, ring.b)


def take_nearer(ring: Ring, me: int, table: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Return me's routing table with each candidate in its slot where the slot is empty or it is nearer."""
    table = table.copy()
    slot = _entry_of(ring, me, cand)
    if len(slot) and slot.max() >= len(table):   # a candidate opens a new row
        cols = 1 << ring.b
        table = np.concatenate([table, np.full((slot.max() // cols + 1) * cols - len(table), -1)])
    dm = ring.prox.dist(np.full(len(cand), me), cand)
    for s, y, d in zip(slot, cand, dm):
        if s < len(table) and (table[s] < 0 or d < ring.prox.dist(np.array([me]), table[s:s + 1])[0]):
            table[s] = y
    return table


def _newcomer_task(ring_bc, absent_bc) -> Callable:
    """Build each newcomer's state from its route's rows, the last node's leaf set and A's neighbors."""
    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ring, n_members = ring_bc.value, int((~absent_bc.value).sum())   # members after this batch
        cols = 1 << ring.b
        for col in batch_columns(batches):
            xs = col["x"].to_numpy().astype(np.int64)
            path_v, path_o = values_offsets(col["path"])
            rts = col["rts"].to_pylist()
            last_leaf = col["last_leaf"].to_pylist()
            a_nbr = col["a_nbr"].to_pylist()
            leaf, rt, nbr = [], [], []
            for i, x in enumerate(xs):
                path = path_v[path_o[i]:path_o[i + 1]]
                rows = rts[i]
                width = max(len(r) for r in rows) // cols
                table = np.full(width * cols, -1, dtype=np.int64)
                for r in range(width):
                    src = min(r, len(path) - 1)
                    cand = np.asarray(rows[src][r * cols:(r + 1) * cols], dtype=np.int64)
                    cand = np.unique(np.concatenate([cand[cand >= 0], [path[src]]]))
                    for c in range(cols):
                        ok = cand[_valid(ring, x, cand, r, c)]
                        if len(ok):
                            table[r * cols + c] = ok[np.argmin(ring.prox.dist(np.full(len(ok), x), ok))]
                rt.append(table)
                known = np.asarray(last_leaf[i] + [int(path[-1])], dtype=np.int64)
                leaf.append(leaf_set_layout(ring, x, known, n_members))
                near = np.unique(np.asarray(a_nbr[i] + [int(path[0])], dtype=np.int64))
                order = np.argsort(ring.prox.dist(np.full(len(near), x), near), kind="stable")
                nbr.append(near[order][:ring.neighborhood])
            yield state_batch(xs, leaf, rt, nbr)
    return _


def _update_task(ring_bc, absent_bc) -> Callable:
    """A member takes the newcomers that named it into its leaf set, routing table and neighbors."""
    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ring, n_members = ring_bc.value, int((~absent_bc.value).sum())   # members after this batch
        for col in batch_columns(batches):
            me = col[ID].to_numpy().astype(np.int64)
            lv, lof = values_offsets(col["leaf"])
            rv, ro = values_offsets(col["rt"])
            nv, no = values_offsets(col["nbr"])
            news = col["news"].to_pylist()
            leaf, rt, nbr = [], [], []
            for i, m in enumerate(me):
                new = np.asarray(news[i], dtype=np.int64)
                leaf.append(leaf_set_layout(ring, m, np.concatenate([lv[lof[i]:lof[i + 1]], new]), n_members))
                rt.append(take_nearer(ring, m, rv[ro[i]:ro[i + 1]], new))
                near = np.unique(np.concatenate([nv[no[i]:no[i + 1]], new]))
                near = near[near != m]
                order = np.argsort(ring.prox.dist(np.full(len(near), m), near), kind="stable")
                nbr.append(near[order][:ring.neighborhood])
            yield state_batch(me, leaf, rt, nbr)
    return _


def _improve_task(ring_bc) -> Callable:
    """A newcomer keeps, in each routing-table slot, the nearest of its entry and the candidates it got."""
    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ring = ring_bc.value
        for col in batch_columns(batches):
            me = col[ID].to_numpy().astype(np.int64)
            rv, ro = values_offsets(col["rt"])
            cv, co = values_offsets(col["cand"])
            rt = []
            for i, m in enumerate(me):
                cand = np.unique(cv[co[i]:co[i + 1]])   # sorted: ties in distance go the same way every run
                rt.append(take_nearer(ring, m, rv[ro[i]:ro[i + 1]], cand[(cand >= 0) & (cand != m)]))
            yield state_batch(me, col["leaf"].to_pylist(), rt, col["nbr"].to_pylist())
    return _


def table_exchange(overlay: Overlay, state: DataFrame, xs: np.ndarray, whole: bool) -> tuple[DataFrame, int]:
    """Second join phase: newcomers ask the nodes in their routing tables for state and keep nearer nodes.

    With `whole` each node named in a newcomer's table sends its whole routing table; without,
    a node in the newcomer's row i sends its own row i. Returns the new state (persisted) and
    the messages (one request and one reply per node asked).
    """
    cols = 1 << overlay.ring.b
    asked = (state.where(F.col(ID).isin([int(v) for v in xs]))
             .select(F.col(ID).alias("x"), F.posexplode("rt").alias("slot", "z")).where(F.col("z") >= 0)
             .select("x", "z", (F.col("slot") / cols).cast("int").alias("row")))
    part = F.col("rt") if whole else F.slice("rt", F.col("row") * cols + 1, F.lit(cols))
    got = (asked.join(state.select(F.col(ID).alias("z"), "rt"), "z")
           .groupBy(F.col("x").alias(ID)).agg(F.flatten(F.collect_list(part)).alias("cand")))
    got = got.localCheckpoint()
    messages = MESSAGES_PER_RPC * bsp.rows(asked)
    improved = state.join(got, ID).mapInArrow(_improve_task(overlay.ring_bc), STATE_SCHEMA)
    parts = max(1, state.sparkSession.sparkContext.defaultParallelism)   # as join_batch lays out the state
    new = (state.join(got.select(ID), ID, "left_anti").unionByName(improved).repartition(parts, ID)
           .persist())
    bsp.rows(new)
    # `got` is not released: a query that misses `new`'s cache recomputes it from `got`; Spark's
    # cleaner frees it once `new` is gone
    state.unpersist()
    return new, int(messages)


IMPROVE = {"none": (), "rows": (False,), "tables": (False, True)}   # second-phase exchanges after a join


def _route_paths(overlay: Overlay, contacts: np.ndarray, xs: np.ndarray) -> DataFrame:
    """Route JOIN messages from the contacts to the newcomers' ids; return (x, path)."""
    ring = overlay.ring
    spark = overlay.state.sparkSession
    msgs = (messages_frame(spark, contacts, ring.hi[xs], ring.lo[xs]).select("mid", "key_hi", "key_lo", AT)
            .withColumn("x", F.element_at(F.array([F.lit(int(v)) for v in xs]), F.col("mid").cast("int") + 1))
            .withColumn("path", F.array(AT)))

    def forward(inflight: DataFrame, k: int, n: int) -> bsp.Split:
        """Each JOIN takes one hop towards the newcomer's id, recording the node it passed."""
        return bsp.Split(next_hop(overlay, inflight),
                         lambda stepped: stepped.where(~F.col("delivered"))
                         .select("mid", "key_hi", "key_lo", F.col("next").alias(AT), "x",
                                 F.concat("path", F.array("next")).alias("path")),
                         {"paths": lambda stepped: stepped.where("delivered").select("x", "path")})

    none = msgs.select("x", "path").limit(0)   # no JOIN sent
    return bsp.run("JOIN", msgs, forward, ring.route_bound).emitted.get("paths", none)


def join_batch(overlay: Overlay, members: np.ndarray, xs: np.ndarray,
               improve: str = "none") -> tuple[Overlay, dict]:
    """Join the newcomers `xs` to the overlay of `members`; return the new overlay and message counts.

    `improve` adds the Pastry paper's second phase to each newcomer's routing table: `rows`
    (ask each row-i node for its row i), or `tables` (that, then ask every node named for its
    whole table); `none` keeps the tables the join route gave.
    """
    if improve not in IMPROVE:
        raise ValueError(f"improve: must be one of {', '.join(IMPROVE)} (got {improve!r})")
    ring = overlay.ring
    spark = overlay.state.sparkSession
    sc = spark.sparkContext
    contacts = ring.prox.nearest(xs, members)
    paths = _route_paths(overlay, contacts, xs)   # materialized by the loop
    state = overlay.state
    missing = np.ones(ring.n, dtype=bool)      # nodes not in the overlay after this batch
    missing[members] = missing[xs] = False
    absent = sc.broadcast(missing)   # one per batch: a share's files would outlive it (thousands at 10^6)
    # gather, per newcomer, its route's routing tables, the last node's leaf set and A's neighbors
    hops = paths.select("x", "path", F.posexplode("path").alias("i", "z"))
    rows = (hops.join(state.select(F.col(ID).alias("z"), "rt"), "z")
            .groupBy("x").agg(F.sort_array(F.collect_list(F.struct("i", "rt"))).alias("s"))
            .select("x", F.col("s.rt").alias("rts")))
    last = paths.select("x", "path", F.element_at("path", -1).alias("zk"), F.element_at("path", 1).alias("a"))
    last = (last.join(state.select(F.col(ID).alias("zk"), F.col("leaf").alias("last_leaf")), "zk")
            .join(state.select(F.col(ID).alias("a"), F.col("nbr").alias("a_nbr")), "a"))
    built = (last.join(rows, "x").select("x", "path", "rts", "last_leaf", "a_nbr")
             .mapInArrow(_newcomer_task(overlay.ring_bc, absent), STATE_SCHEMA).localCheckpoint())
    route_msgs = paths.select(F.sum(F.size("path") - 1)).first()[0] or 0
    # rows from each Z_i, the leaf set and the neighbours
    transfer_msgs = paths.select(F.sum(F.size("path") + 1)).first()[0] or 0
    # X announces itself to everyone it names
    known = F.filter(F.concat("leaf", "rt", "nbr"), lambda v: v >= 0)
    named = built.select(ID, F.array_distinct(known).alias("to"))
    notes = (named.select(F.col(ID).alias("x"), F.explode("to").alias(ID))
             .where(~F.col(ID).isin([int(v) for v in xs])))
    notify_msgs = bsp.rows(notes)
    inbox = notes.groupBy(ID).agg(F.collect_list("x").alias("news"))
    updated = (state.join(inbox, ID).mapInArrow(_update_task(overlay.ring_bc, absent), STATE_SCHEMA))
    # leaf-set exchange until stable (newcomers of this batch learn of each other)
    exchange_msgs = 0
    carry = bsp.Carry()
    state = carry.keep("state", state.join(inbox.select(ID), ID, "left_anti").unionByName(updated)
                       .unionByName(built).repartition(max(1, sc.defaultParallelism), ID))

    def leaf_sets_sent(state: DataFrame) -> DataFrame:
        """Every node sends itself and its leaf set to each member of its leaf set."""
        return state.select(F.explode("leaf").alias(ID), F.concat(F.array(ID), "leaf").alias("c"),
                            F.lit(False).alias("answer"))

    def exchange(inflight: DataFrame, k: int, n: int) -> bsp.Superstep:
        """Each node merges the leaf sets it got and answers senders it does not count as members.

        If any leaf set changed, every node sends its leaf set again.
        """
        nonlocal exchange_msgs
        exchange_msgs += n
        state = carry["state"]
        pushed_by = F.when(~F.col("answer") & (F.col("c")[0] != F.col(ID)), F.col("c")[0])
        got = inflight.groupBy(ID).agg(F.flatten(F.collect_list("c")).alias("cand"),
                                       F.collect_list(pushed_by).alias("from"))
        # cut: read twice, and read whole (a Python task whose output Spark stops reading early, as
        # isEmpty() would, ends with a broken pipe the Python daemon prints as a traceback)
        merged = carry.cut(state.select(ID, "leaf").join(got, ID).mapInArrow(
            leaf_merge_task(overlay.ring_bc, absent, answering=True), ANSWERED))
        newly = merged.where("changed").select(ID, "new_leaf")
        changed = bsp.rows(newly) > 0
        if changed:
            state = carry.keep("state", with_new_leaves(state, newly), unsized=True)
        answers = merged.select(F.explode("answer_to").alias(ID),
                                F.concat(F.array(ID), "new_leaf").alias("c"), F.lit(True).alias("answer"))
        return bsp.Superstep(leaf_sets_sent(state).unionByName(answers) if changed else answers)

    bsp.run("leaf-set exchange", leaf_sets_sent(state), exchange, exchange_bound(ring, members, xs),
            unit="leaf-set messages", carry=carry, unsized=True)
    state = carry["state"].persist()
    bsp.rows(state)
    overlay.state.unpersist()
    counts = {"route": int(route_msgs), "transfer": int(transfer_msgs), "notify": int(notify_msgs),
              "leaf_exchange": int(exchange_msgs)}
    for whole in IMPROVE[improve]:
        state, sent = table_exchange(overlay, state, xs, whole)
        counts["table_exchange" if whole else "row_exchange"] = sent
    return Overlay(ring, overlay.ring_bc, state, "proximity"), counts


def grow(spark: SparkSession, ring: Ring, initial: int, batch: int,
         rng: np.random.Generator, improve: str = "none") -> tuple[Overlay, dict]:
    """Grow an overlay of all ring nodes: `initial` converged members, then joins of `batch` nodes."""
    order = rng.permutation(ring.n)
    members = np.sort(order[:initial])
    overlay = initial_overlay(spark, ring, members)
    totals: dict = {}
    for s in range(initial, ring.n, batch):
        xs = np.sort(order[s:s + batch])
        overlay, counts = join_batch(overlay, members, xs, improve)
        members = np.sort(np.concatenate([members, xs]))
        for k, v in counts.items():
            totals[k] = totals.get(k, 0) + v
        _log.info(f"{len(members)} members after joining {len(xs)} ({counts})")
    return overlay, totals
