"""Pastry in simulated time, in Spark: keep-alives, failure detection, leaf-set and table repair, lookups.

**The model** (times in ms). Every node starts from the converged state. Nodes crash at given times and
stay down, unless they come back (below); a node that leaves gracefully at a given time first sends a
notice to every member of its leaf set, each of which declares it failed on the notice's arrival. A
message from u to v sent at t arrives at (t + link(u, v)) + proc_ms. Node x ticks at phase_x + k
keepalive_ms (k = 0, 1, ...; `keepalive_phase`); at each tick a live x probes every member of its leaf
set, and a member whose reply has not come back failure_timeout_ms after the tick, and that is still in
x's leaf set then, is declared failed. Declaring y failed at x (once per pair) drops y from x's leaf
set, routing table and neighbourhood set; if y was in the leaf set, x asks the farthest member z of that
side (else of the other side) for its leaf set, merges the reply (its leaf set, the reply and z, without
the nodes it knows dead: the L/2 nearest of each side) when it arrives, and declares z failed if no
reply came back failure_timeout_ms after asking. If a lookup found y dead and y was in the routing
table, at slot s of row r, x repairs that entry (lazily: entries emptied by other declarations stay
empty): it asks w, the entry of row r nearest to it by link delay (ties to the lower number) that it has
not asked for s yet, for w's own entry at s (if row r has none, row r + 1, and so on); a reply within
failure_timeout_ms naming a node other than x that x does not know dead, while slot s is still empty,
fills it, any other reply makes x ask the next one, and no reply declares w failed, then x asks the next
one. A lookup is routed hop by hop by the routing rule on the state of the node it is at, at the time it
is there (a side short of L/2 reads as padded with its farthest member); a forwarder that sends to a
node dead on arrival learns it rto_ms after sending, declares it failed and routes again. A lookup is
lost past lookup_timeout_ms or max_attempts hops plus timeouts, or when its node dies while it waits;
delivered, it is correct when it ends at the live node numerically closest to its key at that time.
Nothing at or after `until_ms` happens.

**Returns.** A node down may come back at a given time (RECOVER, before all else then), and go down and
come back again as often as the times given say (`Downs`: a row per down interval), each time with the
state it had but knowing no node dead: it ticks again, and asks every member of its last leaf set to take
it back (a rejoin, timed as a leaf-set request). A live member welcomes it (WELCOME: no longer dead there,
and in the leaf set if among the nearest) and replies with its leaf set, which the node merges (REJOINED,
no repair logged); after each merge it tells the members it has not told yet (announce: a WELCOME at
each). Timers and replies of a life before the return do nothing (`_Node.ignores`: set before the node's
last going); a node heard back within a request's timeout is not declared failed by it (a leaf-set request
is sent again: `reask`). Table and neighbourhood entries once emptied stay empty (`forgot`). A node absent
from the start goes down at -inf: the overlay is built without it in any other node's state
(`overlay.build_overlay(absent=...)`), and it comes back, if it does, as any other node. A *newcomer*, one
of them, joins instead by Pastry's join (`timed_joins`): it comes up knowing no one, its JOIN is routed as a
lookup of its own id, it builds its state from the route's replies (a BUILT event), asks its leaf set to take
it in (rejoins that also take it into tables) and tells the nodes of its table (TAKE_IN events).

**How time is cut.** Not in windows: each message carries its own clock, and every node's state is a
list of versions, each in force from the time of the event that made it (a declaration, a leaf set
merged or a table slot refilled) to the next. A pass derives all events from the versions the events
before it imply: the keep-alive detections in closed form per (node, version, member's down interval), the
leaf-set repair replies by reading the asked node's version at the request's arrival, and the lookups'
timeouts by routing every lookup, one hop per superstep of `bsp.run`, each hop reading its node's
version at the hop's time (`bsp.as_of`). A node answers its own table requests in its fold: a request to
a node dead on arrival times out, and a live node's reply carries its entry as of the arrival, read from
the BOOK events the pass before derived (`_books`): for each slot the node repairs, that entry of every
node it may ask (the slot's row and the next of its table, and every node it asked), per version. A
repair's chain of requests, each sent when the answer to the one before comes, then settles in one pass,
where a pass per request would be needed otherwise; a request to a node without a book gets its answer a
pass later. The passes repeat until one derives the events it was given (`bsp.fixed_point`): as every
event follows what caused it by a positive delay (and a reply reads a book at the request's arrival,
before the reply), each pass fixes at least the earliest event the last one had wrong, and the fixed
point is the sequential run's from any start. The run starts from the fixed point of the maintenance
alone (no lookups); then each pass with lookups first brings the maintenance to its own fixed point with
the lookups' declarations as they are, then routes the lookups once on those states. A pass whose events
changed at few nodes derives anew only what those nodes decide (`_renewed`), and routes again only the
lookups whose reads of node state changed (`_lookups_now`).

**Exact, and where not.** Events at one node at the same time are ordered as a sequential simulation
that handles messages before timers and timers in the order they were set would order them (a tick
reads the state after every other event at its time). Different events that meet at one node at
exactly the same time by coincidence of link delays are ordered by kind only; with delays drawn from
continuous laws that has probability zero. failure_timeout_ms must exceed every round trip, or live
nodes are declared failed at a tick whose probe is answered late; the run does not model that case
(the experiment `churn` refuses such a timeout before it starts).
"""
from __future__ import annotations

import heapq
import logging
import math
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.broadcast import Broadcast
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from scribe_spark import bsp, ids, sessions
from scribe_spark.columns import ID
from scribe_spark.pastry import kernels
from scribe_spark.pastry import timed_joins as tj
from scribe_spark.pastry.failures import leaf_sides
from scribe_spark.pastry.kernels import Ring
from scribe_spark.pastry.overlay import NODES, Members, Overlay
from scribe_spark.spark.arrow import as_u64, batch_columns, local_frame, values_offsets
from scribe_spark.spark.shared import release, share

_log = logging.getLogger(__name__)

# event kinds: a leaf-set reply merged, or what a declaration came from
MERGE, PROBE, LEAF, LOOKUP, LEAVE = "merge", "probe", "leaf", "lookup", "leave"
# a routing-table reply (members: slot, entry), its timeout (members: slot), a node's table before any event,
# and an entry of a node it may ask for a slot, in force from set_t (members: slot, entry; `_books`)
TABLE, TABLE_FAIL, RT, BOOK = "table", "table_fail", "rt", "book"
# a node back up (its own event, before anything else at its time), another node saying it is back (members:
# none), and the reply to its request to be taken back (members: the asked node's leaf set)
RECOVER, WELCOME, REJOINED = "recover", "welcome", "rejoined"
REPLIES = (MERGE, TABLE, REJOINED)   # their set_t is the asked node's time, not the asker's
RECOVER_ORD = -2**30   # a recovery's rejoin timers: before those of any handler at the same time
RECOVERY = ("rejoin", "rejoin_reply", "announce")   # the messages of recoveries
JOINING = ("join", "join_reply", "join_announce")   # the messages of joins (`timed_joins`)
LEAF_ASKS = ("repair_start", "reask")   # the log's leaf-set requests: repairs, and requests sent again
TIMERS_PER_EVENT = 4   # more timers than one handler starts: a timer's order is event * this + its own
# a lookup's retransmission timer is set after those its handler's declaration sets (when rto_ms equals
# failure_timeout_ms they fire together, in that order)
AFTER_HANDLER = 2**31 - 1
MESSAGE, TIMER = 1, 2          # priorities at equal times: messages before timers
BY_HANDLER, BY_TICK = 0, 1     # timers set at one time: those set by a handler before those set by a tick
ISSUED, HOP, TIMEOUT = 0, 1, 2   # how a lookup came to its node: issued there, by a hop, after a timeout
MAINTENANCE = ("probe", "probe_reply", "leaf_request", "leaf_reply", "table_request", "table_reply",
               "leave")   # maintenance messages
TICKS_AT_ONCE = 1_000_000   # probe ticks expanded at once to bin them: memory stays bounded
RENEW_SHARE = 0.2   # a pass whose events changed at fewer nodes than this share renews only what they decide

EVENT_SCHEMA = T.StructType([
    T.StructField("node", T.LongType(), False),      # where it happens
    T.StructField("t", T.DoubleType(), False),
    T.StructField("prio", T.IntegerType(), False),
    T.StructField("set_t", T.DoubleType(), False),   # when the timer was set (the message sent)
    T.StructField("set_by", T.IntegerType(), False),
    T.StructField("ord", T.IntegerType(), False),    # order among timers set by one handler or tick
    T.StructField("kind", T.StringType(), False),
    # the node declared failed, the one that replied, or the one that says it is back (WELCOME)
    T.StructField("other", T.LongType(), False),
    T.StructField("members", NODES, False),          # a reply's leaf set
])
LOG_SCHEMA = T.StructType([
    T.StructField("node", T.LongType(), False),
    # version, detected, repair_start, repaired, table_ask, table_repaired; after a return: rejoin (a request
    # to be taken back), announce (telling a new member), reask (a leaf-set request sent again)
    T.StructField("kind", T.StringType(), False),
    T.StructField("t", T.DoubleType(), False),
    # detected, repair_start: the failed node; repaired: z; table_ask, table_repaired: the slot
    T.StructField("a", T.LongType(), False),
    # repair_start, table_ask, rejoin, announce, reask: the node asked or told; table_repaired: the entry
    T.StructField("b", T.LongType(), False),
    # version: place in the handling order; requests: the order of its timer (`_Node._order`)
    T.StructField("seq", T.IntegerType(), False),
    T.StructField("leaf", NODES, False),             # version: predecessors then successors, nearest first
    T.StructField("npred", T.IntegerType(), False),
    T.StructField("dead", NODES, False),             # version: the nodes known dead
    T.StructField("fslot", T.ArrayType(T.IntegerType(), False), False),   # version: refilled table slots,
    T.StructField("fnode", NODES, False),                                 # and the node in each
    T.StructField("forgot", NODES, False),   # version: nodes once known dead, no longer (table entries empty)
])
LOOKUP_SCHEMA = T.StructType([
    T.StructField("lid", T.LongType(), False),
    T.StructField("t_issue", T.DoubleType(), False),
    T.StructField("key_hi", T.LongType(), False),
    T.StructField("key_lo", T.LongType(), False),
    T.StructField("at", T.LongType(), False),
    T.StructField("t", T.DoubleType(), False),
    T.StructField("hops", T.IntegerType(), False),
    T.StructField("timeouts", T.IntegerType(), False),
    T.StructField("via", T.IntegerType(), False),     # how it came: ISSUED, HOP or TIMEOUT
    T.StructField("avoid", NODES, False),             # the nodes it found dead since it came to this node
    T.StructField("slot", T.IntegerType(), False),    # the table entry its node reads (kernels.table_slot)
])
READS_SCHEMA = T.StructType([T.StructField(name, kind, False) for name, kind in
                             (("lid", T.LongType()), ("at", T.LongType()), ("t", T.DoubleType()),
                              ("state", T.LongType()))])
SENDS_SCHEMA = T.StructType([T.StructField("lid", T.LongType(), False),
                             T.StructField("sent", T.IntegerType(), False)])
DECLARED_SCHEMA = T.StructType([T.StructField("lid", T.LongType(), False)] + EVENT_SCHEMA.fields)
STEP_SCHEMA = T.StructType(LOOKUP_SCHEMA.fields + [
    T.StructField("state", T.LongType(), False),      # the hash of the state it read (`_state_hash`)
    T.StructField("read_at", T.LongType(), False),    # where it read that state (-1: it was not routed)
    T.StructField("read_t", T.DoubleType(), False),
    T.StructField("done", T.BooleanType(), False),
    T.StructField("outcome", T.StringType(), False),
    T.StructField("dest", T.LongType(), False),
    T.StructField("sent", T.IntegerType(), False),
    T.StructField("declared", T.LongType(), False),   # the node found dead (-1: none)
    T.StructField("replied", T.BooleanType(), False),   # a JOIN: its node replies to the newcomer
])


@dataclass(frozen=True)
class Timers:
    """The protocol's timing (ms): keep-alive period, failure timeout, retransmission timeout, hop cost."""

    keepalive_ms: float
    failure_timeout_ms: float
    rto_ms: float
    proc_ms: float
    lookup_timeout_ms: float
    max_attempts: int | None = None   # None: Ring.route_bound
    table_repair: bool = True   # refill a table entry a lookup found dead (else it stays empty)

    def __post_init__(self) -> None:
        """Refuse timings that are not positive: every cause must precede its effect."""
        for name in ("keepalive_ms", "failure_timeout_ms", "rto_ms", "proc_ms", "lookup_timeout_ms"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")


@dataclass(frozen=True)
class Downs:
    """When nodes go down (crash or leave) and come back, if they do: each node's down intervals [down,
    up), in time order, one row each, in a table of those nodes only, for every task to read."""

    nodes: np.ndarray   # sorted; a node has a row per interval, in time order
    down: np.ndarray
    up: np.ndarray      # inf: never back

    @classmethod
    def of(cls, downs: dict[int, sessions.Times], ups: dict[int, sessions.Times] | None = None) -> "Downs":
        """From {node: time or times it goes down} and {node: time or times it comes back}, in turn."""
        return cls.spans(sessions.outages(downs, returns=ups))

    @classmethod
    def spans(cls, rows: list[tuple[int, float, float, bool]]) -> "Downs":
        """From `sessions.outages` rows (node, down, up, graceful), by node then time."""
        node, down, up = (np.array([r[i] for r in rows], dtype=d) for i, d in
                          ((0, np.int64), (1, np.float64), (2, np.float64)))
        return cls(node, down, up)

    def _last(self, nodes: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per node: its row of the last going at or before t (-1: none), its first row, past its last."""
        nodes = np.asarray(nodes, dtype=np.int64)
        t = np.broadcast_to(np.asarray(t, np.float64), nodes.shape)
        lo, hi = np.searchsorted(self.nodes, nodes), np.searchsorted(self.nodes, nodes, side="right")
        i = lo - 1
        todo = np.flatnonzero(lo < hi)
        while len(todo):   # a node has few intervals: step through them
            j = i[todo] + 1
            todo = todo[(j < hi[todo]) & (self.down[np.minimum(j, len(self.down) - 1)] <= t[todo])]
            i[todo] += 1
        return np.where(i >= lo, i, -1), lo, hi

    def _pick(self, values: np.ndarray, i: np.ndarray) -> np.ndarray:
        """values[i] where i is a row, inf where it is past the last row or -1."""
        if not len(values):
            return np.full(len(i), np.inf)
        return np.where((i >= 0) & (i < len(values)), values[np.clip(i, 0, len(values) - 1)], np.inf)

    def at(self, nodes: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each node at its time, from one search of its intervals: whether it is down (gone at or before
        it, and not back by then), and its incarnation (how many times it came back by then)."""
        i, lo, _ = self._last(nodes, t)
        t, up = np.asarray(t, np.float64), self._pick(self.up, i)
        return (i >= 0) & (t < up), np.where(i >= 0, i - lo + (up <= t), 0).astype(np.int32)

    def is_down(self, nodes: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Whether each node is down at its time (`at`)."""
        return self.at(nodes, t)[0]

    def incarnation(self, nodes: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Each node's incarnation at its time (`at`)."""
        return self.at(nodes, t)[1]

    def went_since(self, nodes: np.ndarray, since: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Whether each node went down after `since` and at or before t. Unlike comparing incarnations at
        the two times, it asks nothing of a return at `since` itself, which a `since` recomputed as t less a
        delay can miss by a rounding: a node that sent at its return's very time, went nowhere since."""
        i, _lo, _hi = self._last(nodes, t)
        return (i >= 0) & (self._pick(self.down, i) > np.asarray(since, np.float64))

    def cut(self, nodes: np.ndarray, t_from: np.ndarray) -> np.ndarray:
        """When each node next goes down after t_from (inf: not again); t_from itself for a node absent
        from the start (down since -inf) and not yet back then, whose versions begin at -inf."""
        i, lo, hi = self._last(nodes, t_from)
        j = np.where(i >= 0, i + 1, lo)
        t_from = np.broadcast_to(np.asarray(t_from, np.float64), i.shape)
        absent = (i >= 0) & (self._pick(self.down, i) == -np.inf) & (t_from < self._pick(self.up, i))
        return np.where(absent, t_from, np.where(j < hi, self._pick(self.down, j), np.inf))

    def of_nodes(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every interval of the nodes given: (the node's place in `nodes`, down, up) per interval."""
        nodes = np.asarray(nodes, dtype=np.int64)
        lo, hi = np.searchsorted(self.nodes, nodes), np.searchsorted(self.nodes, nodes, side="right")
        place = np.repeat(np.arange(len(nodes)), hi - lo)
        rows = np.arange(len(place)) - np.repeat(np.cumsum(hi - lo) - (hi - lo), hi - lo) + lo[place]
        return place, self.down[rows], self.up[rows]


def keepalive_phase(nodes: np.ndarray, seed: int, keepalive_ms: float) -> np.ndarray:
    """Each node's first keep-alive tick, uniform in [0, keepalive_ms), from the seed and the node alone."""
    salt = np.uint64(seed * 0x9E3779B97F4A7C15 % 2**64)
    mixed = kernels.splitmix64(np.asarray(nodes, dtype=np.uint64) ^ salt)
    return (mixed >> np.uint64(11)).astype(np.float64) * 2.0**-53 * keepalive_ms


@dataclass
class TimedRun:
    """What a timed run gives: per lookup, the logs of detections and repairs, messages, passes."""

    lookups: pd.DataFrame      # lid, outcome, dest, t_done, hops, timeouts, latency_ms
    detections: pd.DataFrame   # failed, detector, t
    repair_starts: pd.DataFrame  # node, failed, asked, t
    repairs: pd.DataFrame      # node, t
    messages: Counter          # sent over the run, by kind: MAINTENANCE, RECOVERY (if any) and lookup
    maintenance: pd.DataFrame  # t_ms (a bin's start), a column per MAINTENANCE (RECOVERY) kind: sent in it
    passes: int
    table_asks: pd.DataFrame    # node, slot, asked, t: routing-table requests
    table_repairs: pd.DataFrame  # node, slot, entry, t: routing-table entries refilled
    joined: pd.DataFrame | None = None       # node, t: each newcomer's state built (None: no newcomers)
    joins_lost: pd.DataFrame | None = None   # node, t: a newcomer trying again (None: no newcomers)
    paths: pd.DataFrame | None = None        # lid, i, node, t: the SUBSCRIBEs' hops (None: no SUBSCRIBEs)
    events: DataFrame | None = None          # the fixed point's events, if kept (the caller releases them)


@dataclass
class _Context:
    """What every pass reads: the overlay, the shared tables and the run's bounds."""

    overlay: Overlay
    downs: Downs             # the departures (and returns), on the driver
    downs_bc: Broadcast      # the same, for the tasks
    crashed: DataFrame       # y, t_down, t_up: a row per time a node crashes or leaves, and its return
    leavers: DataFrame       # y, t: the nodes that leave gracefully, and when
    timers: Timers
    seed: int
    until: float
    max_attempts: int
    bin_ms: float | None
    bound: int = 1000                            # passes of a loop at most
    routed: dict[str, DataFrame] | None = None   # the last routing's lookups: done, declared, sends, reads
    last: dict[str, DataFrame] | None = None     # the last pass's log and versions
    held: list[DataFrame] = field(default_factory=list)   # the last pass's cuts, released by the next
    held_routed: list[DataFrame] = field(default_factory=list)   # the last routing's, released by the next
    passes: int = 0                              # maintenance passes run (`_maintain`), in every loop
    recovers: DataFrame | None = None            # the recoveries as events (None: nobody comes back)
    members_bc: Broadcast | None = None          # the overlay's shared `members` (None: every node)
    newcomers: np.ndarray | None = None          # the nodes that join (sorted; None: none)
    base: DataFrame | None = None                # the state each node starts from (newcomers' empty)
    lookups_n: int = 0                           # the lookups' ids are below it, the JOINs' from it
    joins: "_JoinLog | None" = None              # the last pass's joins
    subscribes: int | None = None                # the lookups from this id on are SUBSCRIBEs (None: none)
    holders: DataFrame | None = None             # where they stop (`_holders`)

    @property
    def ring_bc(self) -> Broadcast:
        return self.overlay.ring_bc

    @property
    def returns(self) -> bool:
        """Whether any node comes back before the end."""
        return self.recovers is not None


def simulate(overlay: Overlay, crashes: dict[int, sessions.Times], lookups: pd.DataFrame, timers: Timers,
             until_ms: float, seed: int = 0, bound: int = 1000, bin_ms: float | None = None,
             leaves: dict[int, sessions.Times] | None = None,
             recoveries: dict[int, sessions.Times] | None = None,
             newcomers: np.ndarray | None = None, subscribes: int | None = None,
             holders: pd.DataFrame | None = None, warm: DataFrame | None = None,
             keep: bool = False) -> TimedRun:
    """Run the timed protocol from the converged overlay to `until_ms`.

    `lookups` has columns t_issue, src, key_hi, key_lo (uint64 halves); a lookup's id is its row
    number. Keep-alive phases come from `seed` (`keepalive_phase`). Maintenance messages are counted
    per bin of `bin_ms` (one bin for the whole run if None). `crashes`, graceful `leaves` and
    `recoveries` are {node: time or list of times}: each node goes down (a crash or a leave) and comes
    back in turn (`sessions.outages`). The first return of each of `newcomers` (nodes absent from the
    start) is a join (`timed_joins`).

    The lookups from id `subscribes` on are Scribe SUBSCRIBEs: one stops at the first node after its source
    that holds its key's topic at its arrival, as `holders` (key_hi, key_lo, node, t_from, t_to, by, hop)
    say (outcome "grafted"), and the run gives their hops (`TimedRun.paths`). A holding made by hop `hop`
    of SUBSCRIBE `by` (its id less `subscribes`; -1: none) stops only the hops after it, in the order of
    (time, SUBSCRIBE, hop) in which Scribe settles them (`scribe.timed.settle_topic`): never the hop that
    made it.

    `warm`, the events of a run on the same departures (`keep` keeps a run's in `TimedRun.events`), starts
    the passes from there instead of from the maintenance alone: a run that adds a few lookups to another
    then takes a few passes, and ends at the same fixed point (`bsp.fixed_point`).
    """
    spark = overlay.state.sparkSession
    if overlay.ring.n <= overlay.ring.leaf_set:
        raise ValueError(f"the ring needs more than L = {overlay.ring.leaf_set} nodes, has {overlay.ring.n}")
    if bin_ms is not None and not 0 < bin_ms < math.inf:
        raise ValueError(f"bin_ms must be positive and finite (got {bin_ms})")
    spans = sessions.outages(crashes, leaves, recoveries)
    if any(down == -math.inf and graceful for _v, down, _up, graceful in spans):
        raise ValueError("a node absent from the start (down at -inf) crashed, not left")
    if newcomers is not None:
        newcomers = np.unique(np.asarray(newcomers, np.int64)) if len(newcomers) else None
    absent = {v for v, down, *_ in spans if down == -math.inf}
    if newcomers is not None and not absent >= set(newcomers.tolist()):
        raise ValueError("a newcomer must be absent from the start (down at -inf)")
    if newcomers is not None and (overlay.members is None or overlay.members.among(newcomers).any()):
        raise ValueError("the overlay must be built with the newcomers absent (build_overlay(absent=...))")
    table = Downs.spans(spans)
    crashed = local_frame(spark, pd.DataFrame({"y": table.nodes, "t_down": table.down, "t_up": table.up}),
                          "y long, t_down double, t_up double").localCheckpoint()
    left = Downs.spans([r for r in spans if r[3]])
    leavers = local_frame(spark, pd.DataFrame({"y": left.nodes, "t": left.down}), "y long, t double")
    ctx = _Context(overlay=overlay, downs=table, downs_bc=share(spark.sparkContext, table), crashed=crashed,
                   leavers=leavers.localCheckpoint(), timers=timers, seed=seed, until=float(until_ms),
                   max_attempts=timers.max_attempts or overlay.ring.route_bound,
                   bin_ms=bin_ms, bound=bound, recovers=_recover_frame(spark, table, until_ms),
                   members_bc=overlay.members_bc, newcomers=newcomers, base=_base(overlay, newcomers),
                   lookups_n=len(lookups), subscribes=subscribes, holders=_holders(spark, holders))
    start = _lookup_frame(spark, overlay.ring, lookups).localCheckpoint()
    none = _empty(spark, EVENT_SCHEMA)
    ends: list[DataFrame] = []   # each loop's last events, cached
    try:
        # the maintenance alone first: its fixed point is a far better start than no events at all,
        # on which every lookup would route as if nobody knew of any departure and time out at each
        # dead node it meets; any start leads to the same fixed point (`bsp.fixed_point`)
        if warm is None:
            settled, _ = bsp.fixed_point("timed pastry maintenance", none,
                                         lambda ev, _p, ch: _maintain(ctx, ev, ch, None), bound)
            ends.append(settled.events)
            first, changed = settled.events, none   # the same events as the maintenance's last pass
        else:
            first, changed = warm, None
        last, _ = bsp.fixed_point("timed pastry", first, lambda ev, _p, ch: _pass(ctx, ev, ch, start), bound,
                                  changed=changed)
        if not keep:
            ends.append(last.events)
        return replace(_result(ctx, last, ctx.passes), events=last.events if keep else None)
    finally:   # a sweep runs many in one session: nothing of this run stays cached
        for frame in (*ctx.held, *ctx.held_routed, *ends, ctx.crashed, ctx.leavers, start, ctx.recovers,
                      ctx.holders):
            if frame is not None:
                bsp.release(frame)
        if newcomers is not None:
            bsp.release(ctx.base)
        release(ctx.downs_bc)   # the results are pandas frames by now: no task reads it again


def _holders(spark, holders: pd.DataFrame | None) -> DataFrame | None:
    """Where the SUBSCRIBEs stop, as a frame the lookups' supersteps join (None: nowhere)."""
    if holders is None:
        return None
    frame = pd.DataFrame({"_key_hi": holders.key_hi.to_numpy(np.uint64).view(np.int64),
                          "_key_lo": holders.key_lo.to_numpy(np.uint64).view(np.int64),
                          "_node": holders.node.to_numpy(np.int64),
                          "_from": holders.t_from.to_numpy(np.float64),
                          "_to": holders.t_to.to_numpy(np.float64), "_by": holders.by.to_numpy(np.int64),
                          "_hop": holders.hop.to_numpy(np.int64)})
    return local_frame(spark, frame, "_key_hi long, _key_lo long, _node long, _from double, _to double, "
                                     "_by long, _hop long").localCheckpoint()


def _stops(ctx: _Context, read: DataFrame) -> DataFrame:
    """The lookups at their nodes, with `stop`: a SUBSCRIBE at a node holding its topic then (`ctx.holders`,
    which the caller has)."""
    h, t = ctx.holders, F.col("t")
    path, hop = F.col("lid") - ctx.subscribes, F.col("hops") + 1   # this arrival's hop
    earlier = (h["_by"] < path) | ((h["_by"] == path) & (h["_hop"] < hop))
    before = (h["_from"] < t) | ((h["_from"] == t) & earlier)
    ours = (F.col("lid") >= ctx.subscribes) & (F.col("lid") < ctx.lookups_n)
    at = (ours & (F.col("key_hi") == h["_key_hi"]) & (F.col("key_lo") == h["_key_lo"])
          & (F.col("at") == h["_node"]) & before & (t < h["_to"]))
    return (read.join(F.broadcast(h), at, "left").withColumn("stop", F.col("_node").isNotNull())
            .drop("_key_hi", "_key_lo", "_node", "_from", "_to", "_by", "_hop"))


def _base(overlay: Overlay, newcomers: np.ndarray | None) -> DataFrame:
    """The state each node starts from: the overlay's, but a newcomer's empty (it joins knowing no one)."""
    if newcomers is None:
        return overlay.state
    spark, none = overlay.state.sparkSession, F.array().cast(NODES)
    new = local_frame(spark, pd.DataFrame({"_new": newcomers}), "_new long")
    flagged = overlay.state.join(F.broadcast(new), F.col(ID) == F.col("_new"), "left")
    cols = [F.when(F.col("_new").isNull(), F.col(c)).otherwise(none).alias(c) if c in ("leaf", "rt", "nbr")
            else F.col(c) for c in overlay.state.columns]
    return flagged.select(*cols).localCheckpoint()


def _recover_frame(spark, downs: Downs, until: float) -> DataFrame | None:
    """Each return before the end as an event at the node, before all others at its time (None: none)."""
    back = np.flatnonzero(downs.up < until)
    if not len(back):
        return None
    t = downs.up[back]
    frame = pd.DataFrame({"node": downs.nodes[back], "t": t, "prio": 0, "set_t": t, "set_by": 0, "ord": 0,
                          "kind": RECOVER, "other": -1, "members": pd.Series([[]] * len(back), dtype=object)})
    table = pa.Table.from_pandas(frame, schema=to_arrow_schema(EVENT_SCHEMA), preserve_index=False)
    return local_frame(spark, table, EVENT_SCHEMA).localCheckpoint()


def _lookup_frame(spark, ring: Ring, lookups: pd.DataFrame, first: int = 0, t: list[float] | None = None,
                  timeouts: list[int] | None = None) -> DataFrame:
    """The lookups as messages at their sources at their issue times (ids from `first`; or at the times
    `t`, after `timeouts` timeouts: JOINs at their contacts)."""
    n = len(lookups)
    src, khi, klo = (lookups[c].to_numpy(t) for c, t in (("src", np.int64), ("key_hi", np.uint64),
                                                            ("key_lo", np.uint64)))
    frame = pd.DataFrame({
        "lid": first + np.arange(n, dtype=np.int64), "t_issue": lookups.t_issue.to_numpy(np.float64),
        "key_hi": khi.view(np.int64), "key_lo": klo.view(np.int64),
        "at": src, "t": lookups.t_issue.to_numpy(np.float64) if t is None else np.asarray(t, np.float64),
        "hops": np.zeros(n, np.int32),
        "timeouts": np.zeros(n, np.int32) if timeouts is None else np.asarray(timeouts, np.int32),
        "via": np.full(n, ISSUED, np.int32), "avoid": pd.Series([[]] * n, dtype=object),
        "slot": kernels.table_slot(ring, khi, klo, src)[1].astype(np.int32)})
    return local_frame(spark, pa.Table.from_pandas(frame, schema=to_arrow_schema(LOOKUP_SCHEMA),
                                                   preserve_index=False), LOOKUP_SCHEMA)


# ---------------------------------------------------------------- one pass

def _pass(ctx: _Context, events: DataFrame, changed: DataFrame | None, lookups: DataFrame) -> bsp.Pass:
    """Derive every event from the states `events` imply: first the maintenance's to its own fixed point
    with the lookups' declarations as given (`_maintain`), then the lookups' timeouts on those states.

    A chain of requests (a leaf-set repair asking on, or a table repair asking a node without a book)
    settles in the inner loop, a pass per request, without routing the lookups again for each.
    """
    held = _cut(events.filter(F.col("kind").isin(LOOKUP, *tj.GIVEN)))
    settled, _ = bsp.fixed_point("timed pastry maintenance", events,
                                 lambda ev, _p, ch: _maintain(ctx, ev, ch, held), ctx.bound, changed=changed)
    routed = _lookups_now(ctx, lookups, settled.frames["versions"])
    derived = (settled.events.filter(~F.col("kind").isin(LOOKUP, *tj.GIVEN))
               .unionByName(routed["declared"].drop("lid")))
    for frame in ctx.held_routed:   # the routing before's; this one's frames are cut already
        bsp.release(frame)
    ctx.routed, ctx.held_routed = routed, [*routed.values(), held, settled.events]
    if ctx.newcomers is not None:   # the joins' BUILT and TRIED events, and their JOINs' declarations
        joined = _cut(_joins(ctx, events, settled.frames["versions"]))
        ctx.held_routed.append(joined)
        derived = derived.unionByName(joined)
    return bsp.Pass(derived, {**settled.frames, **routed})


def _maintain(ctx: _Context, events: DataFrame, changed: DataFrame | None,
              held: DataFrame | None) -> bsp.Pass:
    """Derive the maintenance's events from the states `events` imply (detections, leaf-set repair replies,
    leave notices, the books of table repairs; returns, rejoin replies and welcomes), with the lookups'
    declarations `held` as they are (None: none, so no table repair begins and no books are needed).

    When few nodes have events that `changed` since the last pass, only what those nodes' events
    decide is derived anew (`_renewed`); the rest is the last pass's.
    """
    moved, asks = _moved(ctx, changed), held is not None
    if moved is None:
        log = _cut(_fold(ctx, events))
        versions = _cut(_versions(log))
        made = _union(_keepalive_events(ctx, versions),
                      _repair_events(ctx, _logged(log, *LEAF_ASKS), versions),
                      _leave_events(ctx, versions), _books(ctx, log, events, versions) if asks else None,
                      *_recovery_events(ctx, log, versions))
    else:
        log, versions, made = _renewed(ctx, events, moved, asks)
    for frame in ctx.held:   # the pass before's; this pass's frames are cut already
        bsp.release(frame)
    ctx.last = {"log": log, "versions": versions}
    ctx.held = [log, versions, *([moved] if moved is not None else [])]
    ctx.passes += 1
    return bsp.Pass(_union(made, held), {"log": log, "versions": versions})


def _moved(ctx: _Context, changed: DataFrame | None) -> DataFrame | None:
    """The nodes whose events changed since the last pass, if few enough for `_renewed` (else None)."""
    if changed is None or ctx.last is None:
        return None
    moved = _cut(changed.select("node").distinct())
    count = bsp.rows(moved)
    if count >= RENEW_SHARE * ctx.overlay.ring.n:
        bsp.release(moved)
        return None
    _log.info(f"this pass derives anew only what the events of {count:,} nodes decide")
    return moved


def _renewed(ctx: _Context, events: DataFrame, moved: DataFrame,
             asks: bool) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The log, versions and derived events, anew only where the nodes that `moved` decide them: a node's
    log and versions follow from its events alone, its keep-alive declarations from its versions, a
    leaf-set repair's or a rejoin's outcome (and the welcome) and a table repair's book from the asker's log
    (and events) and the asked node's versions, a leave's notices from the leaver's versions, an
    announcement's welcome from the announcer's log. The rest is the last pass's log and
    versions, and of the events this pass was given (the last pass's derived events) those of each kind
    that no moved node decides. Books only with `asks` (the lookups' declarations among the events)."""
    log = _cut(_without(ctx.last["log"], moved, "node")
               .unionByName(_fold(ctx, _among(events, moved, "node"))))
    versions = _cut(_without(ctx.last["versions"], moved, "node")
                    .unionByName(_versions(_among(log, moved, "node"))))
    # of the events given, one scan keeps those no moved node decides: keep-alive declarations by their
    # node, repair and rejoin outcomes, welcomes and books by asker and asked node, leave notices by their
    # leaver; returns are given once, in the first pass
    at, of, kind = F.col("_node_moved"), F.col("_other_moved"), F.col("kind")
    asked = kind.isin(MERGE, LEAF, BOOK, REJOINED, WELCOME, tj.TAKE_IN)
    kept = (_flagged(_flagged(events, moved, "node"), moved, "other")
            .filter(((kind == PROBE) & ~at) | (asked & ~at & ~of) | ((kind == LEAVE) & ~of)
                    | (kind == RECOVER))
            .drop("_node_moved", "_other_moved"))
    made = _union(kept, _keepalive_events(ctx, _among(versions, moved, "node"), moved),
                  _repair_events(ctx, _asked(log, LEAF_ASKS, moved), versions),
                  _leave_events(ctx, versions, moved),
                  _books(ctx, log, events, versions, moved) if asks else None,
                  *_recovery_events(ctx, log, versions, moved))
    return log, versions, made


def _union(*frames: DataFrame | None) -> DataFrame:
    """The rows of all the frames given (None: none)."""
    return reduce(DataFrame.unionByName, [f for f in frames if f is not None])


def _logged(log: DataFrame, *kinds: str) -> DataFrame:
    """The log's rows of these kinds."""
    return log.filter(F.col("kind").isin(*kinds))


def _asked(log: DataFrame, kinds: tuple[str, ...], moved: DataFrame) -> DataFrame:
    """The requests of these kinds that a moved node sent or was sent (node: the asker, b: the asked)."""
    sent = _logged(log, *kinds)
    return _among(sent, moved, "node").unionByName(_without(_among(sent, moved, "b"), moved, "node"))


def _cut(frame: DataFrame) -> DataFrame:
    """The frame computed once and kept (until released), in few partitions, with no size estimate."""
    return bsp.sizeless(bsp.merged(frame).localCheckpoint())


def _among(frame: DataFrame, nodes: DataFrame | None, col: str) -> DataFrame:
    """The rows whose `col` is one of `nodes` (all rows if None: every node)."""
    return frame if nodes is None else frame.join(F.broadcast(nodes.withColumnRenamed("node", col)), col,
                                                  "left_semi")


def _flagged(frame: DataFrame, nodes: DataFrame, col: str) -> DataFrame:
    """The frame with a column `_<col>_moved`: whether `col` is one of `nodes`."""
    flag = F.broadcast(nodes.select(F.col("node").alias("_m"), F.lit(True).alias(f"_{col}_moved")))
    return (frame.join(flag, F.col(col) == F.col("_m"), "left").drop("_m")
            .fillna(False, subset=[f"_{col}_moved"]))


def _without(frame: DataFrame, nodes: DataFrame, *cols: str) -> DataFrame:
    """The rows none of whose `cols` is one of `nodes`."""
    for col in cols:
        frame = frame.join(F.broadcast(nodes.withColumnRenamed("node", col)), col, "left_anti")
    return frame


def _lookups_now(ctx: _Context, lookups: DataFrame, versions: DataFrame) -> dict[str, DataFrame]:
    """The lookups' ends, timeouts, sends and state reads on these versions, routing again only the
    lookups that read a state these versions change.

    A lookup's way is a function of the states it reads (and of when nodes are down, which does not change):
    one whose every read finds the same state as in the last pass takes the same way. States are
    compared by a 64-bit hash of the leaf set, its split and the nodes known dead.
    """
    before = ctx.routed
    kept = None
    if before:
        now = bsp.as_of(before["reads"], "at", "t", versions).select("lid", "state",
                                                                     _state_hash().alias("now"))
        moved = now.filter(F.col("state") != F.col("now")).select("lid").distinct()
        # cut once: the todo list and each of the four tables below read it
        kept = _cut(before["done"].select("lid").join(moved, "lid", "left_anti"))
        ctx.held_routed.append(kept)
    todo = lookups.join(kept, "lid", "left_anti") if kept is not None else lookups
    fresh = _route(ctx, todo, versions).emitted
    out = {}
    for name, schema in (("done", STEP_SCHEMA), ("declared", DECLARED_SCHEMA), ("sends", SENDS_SCHEMA),
                         ("reads", READS_SCHEMA)):
        now = fresh.get(name, _empty(lookups.sparkSession, schema))
        if kept is not None:
            now = before[name].join(kept, "lid").unionByName(now)
        out[name] = _cut(now)
    return out


def _empty(spark, schema: T.StructType) -> DataFrame:
    """An empty frame of the schema."""
    return local_frame(spark, pa.Table.from_pylist([], schema=to_arrow_schema(schema)), schema)


def _fold(ctx: _Context, events: DataFrame) -> DataFrame:
    """Each node handles its events in time order: the log of versions, detections and repairs."""
    ring_bc, downs_bc, until, tm = ctx.ring_bc, ctx.downs_bc, ctx.until, ctx.timers
    members_bc, newcomers = ctx.members_bc, ctx.newcomers
    parts = events.sparkSession.sparkContext.defaultParallelism
    schema = to_arrow_schema(LOG_SCHEMA)

    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ring, downs, held = ring_bc.value, downs_bc.value, None
        members = None if members_bc is None else members_bc.value
        wire = _Wire(ring, downs, tm, until, members, newcomers)
        for batch in batches:   # a node's rows are contiguous, maybe cut between two batches
            batch = batch if held is None else pa.concat_batches([held, batch])
            if not batch.num_rows:
                continue
            node = batch.column("node").to_numpy()
            other = np.flatnonzero(node != node[-1])
            body = int(other[-1]) + 1 if len(other) else 0   # the last node's rows may go on in the next
            held = batch.slice(body)
            if body:
                yield _fold_nodes(wire, batch.slice(0, body), schema)
        if held is not None and held.num_rows:
            yield _fold_nodes(wire, held, schema)
    order = ("node", "t", "prio", "set_t", "set_by", "ord")   # a node's events in the order it handles them
    # without table repair or joins no node reads its table: a declared entry reads as empty
    if tm.table_repair or ctx.newcomers is not None:
        events = events.unionByName(_tables(ctx, events))
    return events.repartition(parts, "node").sortWithinPartitions(*order).mapInArrow(_, LOG_SCHEMA)


def _tables(ctx: _Context, events: DataFrame) -> DataFrame:
    """The routing table of each node a lookup's timeout made declare a node failed, or that a newcomer asks
    to take it in, as an event before all others (kind RT): only such a declaration begins a table repair,
    and only a newcomer's word puts a node into a table, so no other node reads its table."""
    kinds = (LOOKUP, tj.TAKE_IN, WELCOME) if ctx.newcomers is not None else (LOOKUP,)
    nodes = events.filter(F.col("kind").isin(*kinds)).select("node").distinct()
    return (ctx.base.select(F.col(ID).alias("node"), F.col("rt").alias("members"))
            .join(nodes, "node", "left_semi")
            .select("node", F.lit(-math.inf).alias("t"), F.lit(0).alias("prio"),
                    F.lit(-math.inf).alias("set_t"), F.lit(0).alias("set_by"), F.lit(0).alias("ord"),
                    F.lit(RT).alias("kind"), F.lit(-1).cast(T.LongType()).alias("other"), "members"))


@dataclass(frozen=True)
class _Wire:
    """What a node's fold reads besides its events: the ring, when nodes are down, the timers and the end."""

    ring: Ring
    downs: Downs
    timers: Timers
    until: float
    members: Members | None = None   # the overlay's nodes present at the start (None: every node)
    newcomers: np.ndarray | None = None   # the nodes that join (sorted; None: none)

    def new(self, nodes: np.ndarray) -> np.ndarray:
        """Which of the nodes are newcomers."""
        return _within(nodes, np.zeros(0, np.int64) if self.newcomers is None else self.newcomers)


def _fold_nodes(wire: _Wire, events: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The fold of each node's events in a batch holding all of them, each node's in handling order."""
    node = events.column("node").to_numpy()
    cut = np.flatnonzero(np.diff(node)) + 1
    starts, ends = np.r_[0, cut], np.r_[cut, len(node)]
    nodes = node[starts].astype(np.int64)
    leaves = (kernels.leaf_sets(wire.ring, nodes) if wire.members is None
              else wire.members.leaf_sets(wire.ring, nodes))   # the state each started from
    new = wire.new(nodes)   # a newcomer starts knowing no one
    members = events.column("members")   # most events carry none: sliced only where a merge reads them
    flat, offs = members.values.to_numpy(zero_copy_only=False).tolist(), members.offsets.to_numpy().tolist()
    cols = [events.column(c).to_pylist() for c in ("t", "prio", "set_t", "set_by", "ord", "kind", "other")]
    rows: list[tuple] = []
    spans: list[list[tuple[float, float]]] = [[] for _ in nodes]
    for g, down, up in zip(*(a.tolist() for a in wire.downs.of_nodes(nodes))):
        spans[g].append((down, up))
    for g, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
        node = _Node(wire.ring, int(nodes[g]), [] if new[g] else leaves[g].tolist(), wire.timers.table_repair,
                     wire, spans[g], bool(new[g]))
        rows += _fold_node(node, wire.until, zip(*(c[a:b] for c in cols), offs[a:b], offs[a + 1:b + 1]),
                           flat)
    return _rows_batch(rows, schema)


def _rows_batch(rows: list[tuple], schema: pa.Schema) -> pa.RecordBatch:
    """Rows of Python values as an Arrow batch (Arrow converts list columns far faster than pandas)."""
    columns = list(zip(*rows)) if rows else [()] * len(schema)
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)],
                                      schema=schema)


def _fold_node(node: "_Node", until: float, events: Iterator[tuple], members: list[int]) -> list[tuple]:
    """One node's events, handled one by one as a sequential run would (see the module's model); each
    event is (t, prio, set_t, set_by, ord, kind, other, a, b), its members being members[a:b], in that
    order. The first are its table (RT, if it repairs its table) and its books (BOOK), neither of which
    has a place in the order; the replies and timeouts of the requests it answers itself join the others
    in the same order."""
    seq, given = 0, iter(events)
    nxt = next(given, None)
    while nxt is not None or node.pending:
        if node.pending and (nxt is None or node.pending[0][:5] < nxt[:5]):
            t, _p, set_t, _b, _o, kind, other, got = heapq.heappop(node.pending)
        else:
            t, _p, set_t, _b, _o, kind, other, a, b = nxt
            got, nxt = members[a:b], next(given, None)
        if kind == BOOK:   # not events the node handles: no place in the order
            node.read_book(int(other), set_t, got)
            continue
        if kind == tj.TRIED:   # a note for the next pass's joins: the node's state does not change
            continue
        if kind == RT:
            node.table = got
            continue
        seq += 1
        if t >= until or node.ignores(t, set_t, kind, int(other)):
            continue
        if node.handle(seq - 1, t, kind, int(other), got):
            node.version()
    return node.rows


class _Node:
    """One node's state while it handles its events, and the log of what it did."""

    def __init__(self, ring: Ring, x: int, leaf: list[int], repair: bool = True,
                 wire: _Wire | None = None, spans: list[tuple[float, float]] = (), new: bool = False) -> None:
        self.ring, self.x, self.half, self.repair, self.wire = ring, x, ring.leaf_set // 2, repair, wire
        self.pred, self.succ = leaf[:self.half], leaf[self.half:]
        self.table: list[int] = []            # the routing table it started with (-1 empty)
        self.fills: dict[int, int] = {}       # slot -> the node a table repair put there
        self.dead: dict[int, None] = {}       # the nodes it knows dead, in the order it declared them
        self.emptied: set[int] = set()        # every node it ever declared: its converged entries stay empty
        self.heard: dict[int, float] = {}     # node -> when it last said it is back
        self.told: set[int] | None = None     # once back up: the nodes it told so (asked or announced to)
        self.downs = [d for d, _ in spans]    # when it goes down, in time order
        self.ups = [u for _, u in spans]      # when it comes back each time (inf: never)
        self.asking: dict[int, int] = {}      # slot -> the node asked for it now
        self.asked: dict[int, set[int]] = {}  # slot -> the nodes asked in its repair
        # (slot, node) -> that node's entry at the slot: from when each was in force, and the entries
        self.books: dict[tuple[int, int], tuple[list[float], list[int]]] = {}
        self.pending: list[tuple] = []        # a heap of the replies and timeouts it answered itself
        self.new, self.built = new, False     # a newcomer, and whether it has built its state
        self.t, self.seq, self.timers = -math.inf, -1, 0
        self.rows: list[tuple] = []
        self.version()   # seq -1: before every event

    def ignores(self, t: float, set_t: float, kind: str, other: int) -> bool:
        """Whether the node lets an event pass: it is down then, or the event is the timer or reply of a
        request it made before it last went down (a life before: the reply's request left before then,
        the reply being timed by the asked node's clock)."""
        i = bisect_right(self.downs, t) - 1   # its last going at or before t
        if i < 0:
            return False
        if t < self.ups[i]:
            return True
        if kind in (RECOVER, WELCOME, LEAVE, tj.TAKE_IN):
            return False
        sent = set_t
        if kind in REPLIES:
            sent = (set_t - float(self.ring.prox.dist([self.x], [other])[0])) - self.wire.timers.proc_ms
        return sent < self.downs[i]

    def handle(self, seq: int, t: float, kind: str, other: int, members: list[int]) -> bool:
        """Handle one event; whether it changed the state others read (a new version)."""
        self.t, self.seq, self.timers = t, seq, 0
        if kind in (MERGE, REJOINED):
            return self._merge(other, members, repair=kind == MERGE)
        if kind == TABLE:
            return self._table_reply(other, *members)
        if kind == TABLE_FAIL:
            return self._table_fail(other, members[0])
        if kind == RECOVER:
            return self._recover()
        if kind == WELCOME:
            self._welcome(other)
            if members:   # a newcomer's rejoin: it asks to be taken into the table too
                self._take_in(other)
            return True
        if kind == tj.TAKE_IN:   # a newcomer's word: it is alive, and asks for a place in the table
            known = self._hear(other)
            return self._take_in(other) or known
        if kind == tj.BUILT:
            return self._built(members)
        if kind == PROBE and (other not in self.pred and other not in self.succ or self._heard(other)):
            return False
        if kind == LEAF and self._heard(other):
            self._log("reask", -1, other, self._order())   # it is back: asked again, not declared
            return False
        if kind == LOOKUP and self._heard(other, by_lookup=True):
            return False
        return self._declare(other, by_lookup=self.repair and kind == LOOKUP)

    def _heard(self, y: int, by_lookup: bool = False) -> bool:
        """Whether y said it is back since the request now timing out was sent: within the failure timeout
        (a lookup's: the retransmission timeout) before now."""
        if y not in self.heard or self.wire is None:
            return False
        timers = self.wire.timers
        return self.heard[y] >= self.t - (timers.rto_ms if by_lookup else timers.failure_timeout_ms)

    def version(self) -> None:
        """Log the state now in force."""
        slots = sorted(self.fills)
        self.rows.append((self.x, "version", self.t, -1, -1, self.seq, self.pred + self.succ, len(self.pred),
                          list(self.dead), slots, [self.fills[s] for s in slots],
                          sorted(self.emptied.difference(self.dead))))

    def _log(self, kind: str, a: int, b: int, seq: int = -1) -> None:
        """Log a detection, a repair begun or done, a request to be taken back."""
        self.rows.append((self.x, kind, self.t, a, b, seq, [], 0, [], [], [], []))

    def _order(self) -> int:
        """The order of a timer this handler starts, among all timers of this node set at this time."""
        self.timers += 1
        return self.seq * TIMERS_PER_EVENT + self.timers - 1

    def _merge(self, z: int, members: list[int], repair: bool = True) -> bool:
        """z's leaf set arrived: keep the L/2 nearest of each side among all known live candidates (a repair,
        or a reply to its request to be taken back); a node back up tells the new members."""
        self._take((set(self.pred).union(self.succ, members) | {z}) - {self.x} - self.dead.keys())
        if repair:
            self._log("repaired", z, -1)
        if self.told is not None:
            for j, c in enumerate(self.pred + self.succ):
                if c not in self.told:
                    self.told.add(c)
                    self._log("announce", -1, c, j)
        return True

    def _take(self, cands: set[int]) -> None:
        """Keep the L/2 nearest candidates of each side as the leaf set."""
        smaller, larger = leaf_sides(self.ring, self.x, list(cands))
        self.pred, self.succ = smaller[:self.half], larger[:self.half]

    def _recover(self) -> bool:
        """Back up with the state it had, knowing no node dead: it asks each member of its last leaf set to
        take it back (a rejoin), each request with its timer before those of any later handler. A newcomer
        without its state joins (again) instead."""
        if self.new and not self.built:
            return self._join()
        self.dead.clear()   # `emptied` keeps them: their converged entries stay empty
        self.asked.clear()
        self.asking.clear()
        leaf = self.pred + self.succ
        self.told = set(leaf)
        for j, m in enumerate(leaf):
            self._log("rejoin", -1, m, RECOVER_ORD + j)
        return True

    def _join(self) -> bool:
        """A newcomer comes up knowing no one; its JOIN is the joins' step's (`timed_joins`)."""
        self.pred, self.succ = [], []
        self.fills.clear()
        self.dead.clear()
        self.asked.clear()
        self.asking.clear()
        self.told = set()
        return True

    def _built(self, members: list[int]) -> bool:
        """The newcomer's state from its route (members: how many predecessors and successors, those, then
        (slot, entry) pairs of its table): it asks its leaf set to take it in (rejoins flagged a = 1, whose
        welcomes also take it into tables) and tells the other nodes of its table (join_announce)."""
        npred, nsucc = members[0], members[1]
        self.pred, self.succ = members[2:2 + npred], members[2 + npred:2 + npred + nsucc]
        rest = members[2 + npred + nsucc:]
        self.fills = dict(zip(rest[0::2], rest[1::2]))
        self.built = True
        leaf = self.pred + self.succ
        self.told.update(leaf)
        for m in leaf:   # up to |L| timers: orders past TIMERS_PER_EVENT may equal a later event's, which
            self._log("rejoin", 1, m, self._order())   # misorders only timers due at the very same time
        for j, s in enumerate(sorted(self.fills)):
            if self.fills[s] not in self.told:
                self.told.add(self.fills[s])
                self._log("join_announce", -1, self.fills[s], j)
        return True

    def _take_in(self, v: int) -> bool:
        """Newcomer v into its table slot for v, if empty or v is nearer by link delay (ties: the lower
        number) than the entry there."""
        s = tj.slot_for(self.ring, self.x, v)
        if s is None:
            return False
        e = self._entry(s)
        if e >= 0:
            d = self.ring.prox.dist(np.full(2, self.x), np.array([v, e], np.int64)).astype(np.float64)
            d = d.tolist()
            if (d[0], v) >= (d[1], e):
                return False
        self.fills[s] = v
        return True

    def _size(self) -> int:
        """The table's length in whole rows: the one it started with, or as far as its filled slots go."""
        cols = 1 << self.ring.b
        return max(len(self.table), -(-(max(self.fills, default=-1) + 1) // cols) * cols)

    def _hear(self, v: int) -> bool:
        """v says it is alive: no longer dead to this node (whether it was, returned), heard from now."""
        known = v in self.dead
        self.dead.pop(v, None)
        self.heard[v] = self.t
        return known

    def _welcome(self, v: int) -> bool:
        """v says it is back: no longer dead to this node, and in its leaf set if among the nearest."""
        self._hear(v)
        self._take((set(self.pred).union(self.succ) | {v}) - {self.x} - self.dead.keys())
        return True

    def _declare(self, y: int, by_lookup: bool = False) -> bool:
        """Declare y failed: drop it, repair its leaf-set side, and its table entry if a lookup found it dead
        (False: known already)."""
        if y in self.dead:
            return False
        fresh = y not in self.emptied   # a node declared before has no converged entry left
        self.dead[y] = None
        self.emptied.add(y)
        side = self.pred if y in self.pred else self.succ if y in self.succ else None
        self._log("detected", y, -1)
        if side is not None:
            side.remove(y)
            far = side if side else (self.succ if side is self.pred else self.pred)
            if far:
                self._log("repair_start", y, far[-1], self._order())
        slot = self._slot_of(y, fresh)
        if slot is not None:
            self._empty(slot)
            if by_lookup:
                self.asked[slot] = set()
                self._ask(slot)
        return True

    def _empty(self, s: int) -> None:
        """Empty slot s: a refill goes; a taken-in newcomer over a live entry leaves -1 there, which the
        entry it replaced does not come back from, and so does one past the table it started with (the
        table keeps the rows it grew)."""
        under = self.table[s] if s < len(self.table) else -1
        if s in self.fills and (s >= len(self.table) or (under >= 0 and under not in self.emptied)):
            self.fills[s] = -1
        else:
            self.fills.pop(s, None)

    def _slot_of(self, y: int, fresh: bool = True) -> int | None:
        """The table slot naming y, if any (a node fits one slot only; a converged one only if `fresh`)."""
        for s, e in self.fills.items():
            if e == y:
                return s
        if not fresh:
            return None
        try:
            s = self.table.index(y)
        except ValueError:
            return None
        return None if s in self.fills else s

    def _entry(self, s: int) -> int:
        """The table entry at slot s now (-1: empty, known dead, or a converged entry emptied)."""
        if s in self.fills:
            return -1 if self.fills[s] in self.dead else self.fills[s]
        e = self.table[s] if s < len(self.table) else -1
        return -1 if e in self.emptied else e

    def _ask(self, s: int) -> None:
        """Ask the nearest entry not yet asked, of slot s's row or of the first row after it with one."""
        cols = 1 << self.ring.b
        for r in range(s // cols, self._size() // cols):
            row = [e for e in map(self._entry, range(r * cols, (r + 1) * cols))
                   if e >= 0 and e not in self.asked[s]]
            if row:
                d = self.ring.prox.dist(np.full(len(row), self.x), np.asarray(row, np.int64)).tolist()
                w = min(zip(map(float, d), row))[1]
                self.asked[s].add(w)
                self.asking[s] = w
                order = self._order()
                self._log("table_ask", s, w, order)
                self._answer(s, w, order)
                return
        self.asked.pop(s, None)

    def read_book(self, w: int, t_from: float, members: list[int]) -> None:
        """Note w's entry at a slot (members: slot, entry) in force from t_from (books come in time order)."""
        times, entries = self.books.setdefault((members[0], w), ([], []))
        times.append(t_from)
        entries.append(members[1])

    def _answer(self, s: int, w: int, order: int) -> None:
        """Add to its pending events what asking w for slot s now brings, if the node can tell: the timeout
        if no reply comes within the failure timeout, else w's entry as of the request's arrival, if it
        holds w's book (if not, the next pass gives it the book, and it asks again)."""
        wire = self.wire
        if wire is None:
            return
        t_a, t_r, replies = (float(v[0]) for v in _request_times(
            wire.ring, wire.downs, wire.timers, wire.until, np.array([self.x], np.int64),
            np.array([w], np.int64), np.array([self.t], np.float64)))
        expires = self.t + wire.timers.failure_timeout_ms
        if not (replies and t_r <= expires):
            heapq.heappush(self.pending, (expires, TIMER, self.t, BY_HANDLER, order, TABLE_FAIL, w, [s]))
        elif (s, w) in self.books:
            times, entries = self.books[(s, w)]
            entry = entries[bisect_right(times, t_a) - 1]
            heapq.heappush(self.pending, (t_r, MESSAGE, t_a, BY_HANDLER, order, TABLE, w, [s, entry]))

    def _table_reply(self, w: int, s: int, e: int) -> bool:
        """w's entry for slot s arrived: taken if usable and the slot still empty, else ask on."""
        if self.asking.get(s) != w:
            return False
        del self.asking[s]
        if e >= 0 and e != self.x and e not in self.dead and self._entry(s) == -1:
            self.fills[s] = e
            self.asked.pop(s, None)
            self._log("table_repaired", s, e)
            return True
        self._ask(s)
        return False

    def _table_fail(self, w: int, s: int) -> bool:
        """No answer from w for slot s: w is failed, and x asks on."""
        if self.asking.get(s) != w:
            return False
        del self.asking[s]
        declared = not self._heard(w) and self._declare(w)
        self._ask(s)
        return declared


def _versions(log: DataFrame) -> DataFrame:
    """Each node's states with the interval each was in force: node, t_from, t_to, vleaf, npred, dead, the
    table slots refilled (fslot, fnode) and the nodes no longer dead whose converged entries stay empty."""
    w = Window.partitionBy("node").orderBy("t", "seq")   # versions made at one time: the last one holds
    return (log.filter(F.col("kind") == "version")
            .select("node", F.col("t").alias("t_from"),
                    F.coalesce(F.lead("t").over(w), F.lit(math.inf)).alias("t_to"),
                    F.col("leaf").alias("vleaf"), "npred", "dead", "fslot", "fnode", "forgot"))


# ---------------------------------------------------------------- keep-alives

def _keepalive_events(ctx: _Context, versions: DataFrame, among: DataFrame | None = None) -> DataFrame:
    """The declarations keep-alives would make: per node, version and member's down interval, its failing
    ticks (of the nodes `among` only, if given, and `versions` theirs)."""
    pairs = _crashed_members(ctx, versions, among)
    ring_bc, downs_bc, tm, seed, until = ctx.ring_bc, ctx.downs_bc, ctx.timers, ctx.seed, ctx.until

    def _(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        ring, downs = ring_bc.value, downs_bc.value
        for df in frames:
            yield _failing_ticks(ring, downs, tm, seed, until, df)
    return pairs.mapInPandas(_, EVENT_SCHEMA)


def _members(ctx: _Context, versions: DataFrame, among: DataFrame | None = None) -> DataFrame:
    """(x, t_from, t_to, j, y): member y at place j of node x's leaf set from t_from to t_to, for every
    node (or those `among`): its versions, or its converged leaf set for all time if it has none."""
    changed = versions.select(F.col("node").alias("x"), "t_from", "t_to",
                              F.posexplode("vleaf").alias("j", "y"))
    with_versions = versions.select(F.col("node").alias(ID)).distinct()
    still = (_among(ctx.base, among, ID).join(with_versions, ID, "left_anti")
             .select(F.col(ID).alias("x"), F.lit(-math.inf).alias("t_from"), F.lit(math.inf).alias("t_to"),
                     F.posexplode("leaf").alias("j", "y")))
    return changed.unionByName(still)


def _crashed_members(ctx: _Context, versions: DataFrame, among: DataFrame | None) -> DataFrame:
    """`_members` whose member goes down, a row per time it does (t_down, t_up: when it goes and is back)."""
    return (_members(ctx, versions, among).join(F.broadcast(ctx.crashed), "y")
            .select("x", "t_from", "t_to", "j", "y", "t_down", "t_up"))


def _failing_ticks(ring: Ring, downs: Downs, tm: Timers, seed: int, until: float,
                   df: pd.DataFrame) -> pd.DataFrame:
    """The probe timeouts that find a member down: at most those within failure_timeout_ms of the first
    probe that reaches it down, for each time it is (each a row)."""
    x, y = df.x.to_numpy(np.int64), df.y.to_numpy(np.int64)
    phase = keepalive_phase(x, seed, tm.keepalive_ms)
    d = ring.prox.dist(x, y).astype(np.float64)
    t_from = df.t_from.to_numpy(np.float64)
    end = np.minimum(np.minimum(df.t_to.to_numpy(np.float64), until), downs.cut(x, t_from))
    t_down, t_up = df.t_down.to_numpy(np.float64), df.t_up.to_numpy(np.float64)
    row, s = _ticks_failing(phase, tm, t_from, end, d, t_down, t_up, until)
    fd = tm.failure_timeout_ms
    return pd.DataFrame({"node": x[row], "t": s + fd, "prio": TIMER, "set_t": s, "set_by": BY_TICK,
                         "ord": df.j.to_numpy(np.int64)[row], "kind": PROBE, "other": y[row],
                         "members": pd.Series([[]] * len(row), dtype=object)},
                        columns=[f.name for f in EVENT_SCHEMA.fields])


def _ticks_failing(phase: np.ndarray, tm: Timers, t_from: np.ndarray, end: np.ndarray, d: np.ndarray,
                   t_down: np.ndarray, t_up: np.ndarray, until: float) -> tuple[np.ndarray, np.ndarray]:
    """Per row, its ticks in [t_from, end) whose probe reaches the member down (arriving in [t_down,
    t_up)), up to failure_timeout_ms after the first: (row, tick) pairs, by row then time.

    Later ones cannot matter: the first one's timeout removes the member, finds it gone, or finds it heard
    from since (a member back up tells the node after it came back, so after every later failing probe).
    """
    period, fd = tm.keepalive_ms, tm.failure_timeout_ms
    k = first_ticks(phase, period, lambda s, i: s >= t_from[i], guess_ticks(t_from, phase, period))
    k = first_ticks(phase, period, lambda s, i: (s + d[i]) + tm.proc_ms >= t_down[i],
                    np.maximum(k, (t_down - d - tm.proc_ms - phase) / period), floor=k)
    first = phase + k * period
    rows, ticks, live = [], [], np.arange(len(phase))
    while len(live):
        s = phase[live] + k[live] * period
        ok = ((s < end[live]) & (s <= first[live] + fd) & (s + fd < until)
              & ((s + d[live]) + tm.proc_ms < t_up[live]))
        live, s = live[ok], s[ok]
        rows.append(live)
        ticks.append(s)
        k[live] += 1
    if not rows:   # no rows at all
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    row, tick = np.concatenate(rows), np.concatenate(ticks)
    order = np.argsort(row, kind="stable")   # each row's ticks were found in time order
    return row[order], tick[order]


def guess_ticks(t: np.ndarray, phase: np.ndarray, period: float) -> np.ndarray:
    """Roughly the tick number at each time t (0 before the first)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(t), (t - phase) / period, 0.0)


def first_ticks(phase: np.ndarray, period: float, ok: Callable[[np.ndarray, np.ndarray], np.ndarray],
                guess: np.ndarray, floor: np.ndarray | None = None) -> np.ndarray:
    """Per row i, the first k >= floor[i] whose tick phase[i] + k period satisfies ok(tick, i) (monotone
    in k), searched from `guess` (k as whole floats: phase + k period computes as with integers)."""
    floor = np.zeros(len(phase)) if floor is None else floor
    k = np.maximum(floor, np.ceil(guess))
    todo = np.flatnonzero(k > floor)
    while len(todo):
        todo = todo[ok(phase[todo] + (k[todo] - 1) * period, todo)]
        k[todo] -= 1
        todo = todo[k[todo] > floor[todo]]
    todo = np.arange(len(phase))
    while len(todo):
        todo = todo[~ok(phase[todo] + k[todo] * period, todo)]
        k[todo] += 1
    return k


# ---------------------------------------------------------------- leaf-set repair

def _repair_events(ctx: _Context, starts: DataFrame, versions: DataFrame) -> DataFrame:
    """Each repair request's outcome: the asked node's leaf set merged, or the asked node declared failed."""
    return _replies(ctx, _requests(ctx, starts), versions, MERGE)


def _replies(ctx: _Context, requests: DataFrame, versions: DataFrame, reply: str) -> DataFrame:
    """Each leaf-set request's outcome (`_requests`): a reply of kind `reply` holding the asked node's leaf
    set as of the arrival, or a timeout that declares the asked node failed."""
    read = bsp.as_of(requests, "z", "t_a", versions)
    conv = ctx.base.select(F.col(ID).alias("z"), F.col("leaf").alias("conv"))
    read = read.join(conv, "z")
    merged = (read.filter("replies")
              .select(F.col("x").alias("node"), F.col("t_r").alias("t"), F.lit(MESSAGE).alias("prio"),
                      F.col("t_a").alias("set_t"), F.lit(BY_HANDLER).alias("set_by"),
                      F.col("seq").alias("ord"), F.lit(reply).alias("kind"), F.col("z").alias("other"),
                      F.coalesce("vleaf", "conv").alias("members")))
    fd = ctx.timers.failure_timeout_ms
    silent = (read.filter(~F.col("replies") | (F.col("t_r") > F.col("t") + fd))
              .select(F.col("x").alias("node"), (F.col("t") + fd).alias("t"), F.lit(TIMER).alias("prio"),
                      F.col("t").alias("set_t"), F.lit(BY_HANDLER).alias("set_by"), F.col("seq").alias("ord"),
                      F.lit(LEAF).alias("kind"), F.col("z").alias("other"),
                      F.array().cast(NODES).alias("members")))
    return merged.unionByName(silent).filter(F.col("t") < ctx.until)


def _welcomes(requests: DataFrame, kind: str = WELCOME) -> DataFrame:
    """A node's word that it is back (a rejoin or an announcement), at each live receiver (`_requests`);
    a newcomer's rejoin (a = 1) carries members [1]: take it into the table too. With kind TAKE_IN: a
    newcomer's word to a node of its table."""
    flag = F.when(F.col("a") == 1, F.array(F.lit(1).cast(T.LongType()))).otherwise(F.array().cast(NODES))
    return (requests.filter("replies")
            .select(F.col("z").alias("node"), F.col("t_a").alias("t"), F.lit(MESSAGE).alias("prio"),
                    F.col("t").alias("set_t"), F.lit(BY_HANDLER).alias("set_by"), F.col("seq").alias("ord"),
                    F.lit(kind).alias("kind"), F.col("x").alias("other"),
                    (flag if kind == WELCOME else F.array().cast(NODES)).alias("members")))


def _recovery_events(ctx: _Context, log: DataFrame, versions: DataFrame,
                     moved: DataFrame | None = None) -> list[DataFrame]:
    """The recoveries (only in a whole pass: a renewed one keeps them), and what the rejoins and the
    announcements logged bring (of the requests a `moved` node sent or was sent, if given)."""
    if not ctx.returns:
        return []
    if moved is None:
        rejoins, told = _logged(log, "rejoin"), _logged(log, "announce")
    else:
        rejoins, told = _asked(log, ("rejoin",), moved), _asked(log, ("announce",), moved)
    asked = _requests(ctx, rejoins)   # a member welcomes the node, then replies
    made = [*([ctx.recovers] if moved is None else []), _replies(ctx, asked, versions, REJOINED),
            _welcomes(asked), _welcomes(_requests(ctx, told))]
    if ctx.newcomers is not None:   # a newcomer's word to the nodes of its table
        noted = _logged(log, "join_announce") if moved is None else _asked(log, ("join_announce",), moved)
        made.append(_welcomes(_requests(ctx, noted), tj.TAKE_IN))
    return made


def _requests(ctx: _Context, starts: DataFrame) -> DataFrame:
    """Requests logged as (node, t, a, b, seq): from x = node to z = b at t, its arrival t_a, the reply's t_r,
    and whether z replies (a: what the request is about; seq: its timer's order)."""
    ring_bc, downs_bc, tm, until = ctx.ring_bc, ctx.downs_bc, ctx.timers, ctx.until
    schema = "x long, t double, seq int, a long, z long, t_a double, t_r double, replies boolean"

    def _(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        ring, downs = ring_bc.value, downs_bc.value
        for df in frames:
            x, z, t = df.node.to_numpy(np.int64), df.b.to_numpy(np.int64), df.t.to_numpy(np.float64)
            t_a, t_r, replies = _request_times(ring, downs, tm, until, x, z, t)
            yield pd.DataFrame({"x": x, "t": t, "seq": df.seq.to_numpy(np.int32),
                                "a": df.a.to_numpy(np.int64), "z": z, "t_a": t_a, "t_r": t_r,
                                "replies": replies})
    return starts.mapInPandas(_, schema)


def _books(ctx: _Context, log: DataFrame, events: DataFrame, versions: DataFrame,
           moved: DataFrame | None = None) -> DataFrame | None:
    """The entries a node may ask for, as the asked nodes' versions have them (kind BOOK, in force from
    set_t; members: slot, entry; once per change), for the pairs `_book_pairs` names: a node answers its
    table requests from them (`_Node._answer`), and a repair's chain of requests settles in one pass.
    Only the books a `moved` node (asker or asked) decides, if given; None without table repair."""
    if not ctx.timers.table_repair:
        return None
    pairs = _book_pairs(ctx, log, events)
    if moved is not None:
        pairs = (_flagged(_flagged(pairs.withColumnRenamed("w", "other"), moved, "node"), moved, "other")
                 .filter(F.col("_node_moved") | F.col("_other_moved"))
                 .select("node", "s", F.col("other").alias("w")))
    live = versions.filter(F.col("t_from") < F.col("t_to"))   # versions made at one time: the last one holds
    read = (pairs.join(ctx.base.select(F.col(ID).alias("w"), F.col("rt").alias("wrt")), "w")
            .join(live.withColumnRenamed("node", "w"), "w", "left"))
    entry = _entry_at(F.col("s"), "wrt", ctx.returns)
    entry = F.when(F.array_contains(F.coalesce("dead", F.array().cast(NODES)), entry), -1).otherwise(entry)
    read = read.select("node", "s", "w", F.coalesce("t_from", F.lit(-math.inf)).alias("set_t"),
                       entry.cast(T.LongType()).alias("entry"))
    before = F.lag("entry").over(Window.partitionBy("node", "s", "w").orderBy("set_t"))
    changes = F.col("before").isNull() | (F.col("before") != F.col("entry"))
    return (read.withColumn("before", before).filter(changes)
            .select("node", F.lit(-math.inf).alias("t"), F.lit(0).alias("prio"), "set_t",
                    F.lit(1).alias("set_by"), F.lit(0).alias("ord"), F.lit(BOOK).alias("kind"),
                    F.col("w").alias("other"),
                    F.array(F.col("s").cast(T.LongType()), "entry").alias("members")))


def _book_pairs(ctx: _Context, log: DataFrame, events: DataFrame) -> DataFrame:
    """(node, s, w): a slot s that node asked for in `log`, or whose entry in its table a lookup found dead
    in `events`, and each w it may ask for it: the entries of s's row and of the row after it in its table,
    and the nodes it asked (a chain that goes on further finds their books a pass later)."""
    kind, cols = F.col("kind"), 1 << ctx.overlay.ring.b
    rts = ctx.base.select(F.col(ID).alias("node"), F.col("rt").alias("xrt"))
    asked = (log.filter(kind == "table_ask")
             .select("node", F.col("a").cast(T.IntegerType()).alias("s"), F.col("b").alias("w")))
    # the slots asked for, and the dead entries lookups found (their slots are read from the same join)
    found = events.filter(kind == LOOKUP).select("node", F.lit(None).cast(T.IntegerType()).alias("s"),
                                                 F.col("other").alias("dead"))
    wanted = (asked.select("node", "s", F.lit(None).cast(T.LongType()).alias("dead")).unionByName(found)
              .distinct().join(rts, "node"))
    slot = F.coalesce("s", (F.array_position("xrt", F.col("dead")) - 1).cast(T.IntegerType()))
    slots = wanted.select("node", slot.alias("s"), "xrt").filter(F.col("s") >= 0)
    rows = F.slice("xrt", F.col("s") - F.col("s") % cols + 1, 2 * cols)   # a repair rarely goes further
    table = (slots.select("node", "s", rows.alias("rows"))
             .select("node", "s", F.explode("rows").alias("w")).filter(F.col("w") >= 0))
    return table.unionByName(asked).distinct()


def _request_times(ring: Ring, downs: Downs, tm: Timers, until: float, x: np.ndarray, z: np.ndarray,
                   t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Requests (leaf-set, table, rejoin, announcement) from x to z sent at t: their arrival, the replies'
    arrival, whether z replies (is up at the arrival, before the end)."""
    t_a = (t + ring.prox.dist(x, z).astype(np.float64)) + tm.proc_ms
    t_r = (t_a + ring.prox.dist(z, x).astype(np.float64)) + tm.proc_ms
    return t_a, t_r, ~downs.is_down(z, t_a) & (t_a < until)


# ---------------------------------------------------------------- graceful leaves

def _leave_notices(ctx: _Context, versions: DataFrame, among: DataFrame | None = None) -> DataFrame:
    """(y, t, ord, x, t_a): leaver y (of those `among`, if given) at t tells member x (place ord) of its
    leaf set then; x hears at t_a."""
    ring_bc, proc = ctx.ring_bc, ctx.timers.proc_ms
    conv = ctx.base.select(F.col(ID).alias("y"), F.col("leaf").alias("conv"))
    leaving = _among(ctx.leavers.filter(F.col("t") < ctx.until), among, "y")   # nothing at or after the end
    read = bsp.as_of(leaving, "y", "t", versions).join(conv, "y")
    told = read.select("y", "t", F.posexplode(F.coalesce("vleaf", "conv")).alias("ord", "x"))

    def _(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        ring = ring_bc.value
        for df in frames:
            d = ring.prox.dist(df.y.to_numpy(np.int64), df.x.to_numpy(np.int64)).astype(np.float64)
            yield df.assign(t_a=(df.t.to_numpy(np.float64) + d) + proc)
    return told.mapInPandas(_, "y long, t double, ord int, x long, t_a double")


def _leave_events(ctx: _Context, versions: DataFrame, among: DataFrame | None = None) -> DataFrame:
    """The leave notices as events at their receivers: each declares the leaver failed there."""
    return (_leave_notices(ctx, versions, among).filter(F.col("t_a") < ctx.until)
            .select(F.col("x").alias("node"), F.col("t_a").alias("t"), F.lit(MESSAGE).alias("prio"),
                    F.col("t").alias("set_t"), F.lit(BY_HANDLER).alias("set_by"), "ord",
                    F.lit(LEAVE).alias("kind"), F.col("y").alias("other"),
                    F.array().cast(NODES).alias("members")))


# ---------------------------------------------------------------- lookups

def _route(ctx: _Context, lookups: DataFrame, versions: DataFrame, joins: bool = False) -> bsp.Outcome:
    """Route every lookup to its end, each hop on its node's version at the hop's time (with `joins`, JOINs:
    also their replies and their sends' times)."""
    state = ctx.base.select(F.col(ID).alias("_sid"), "leaf", "rt", "nbr")
    task = _route_task(ctx)
    names = [f.name for f in LOOKUP_SCHEMA.fields]
    until, rto = ctx.until, ctx.timers.rto_ms
    # the state in force: a node's latest version, else its converged state; the routing-table entry
    # the lookup reads (-1: empty, or dead to the node or to the lookup), and the rest of the table and
    # the neighbourhood set only where the rule needs them, when that entry is -1
    none = F.array().cast(NODES)
    dead = F.coalesce("dead", none)
    entry = _entry_at(F.col("slot"), "rt", ctx.returns)
    entry = F.when(F.array_contains(dead, entry) | F.array_contains("avoid", entry), -1).otherwise(entry)
    back = ctx.returns
    table = _whole_table(ctx, back)
    forgot = F.coalesce("forgot", none)
    nbr = F.filter("nbr", lambda v: ~F.array_contains(forgot, v)) if back else F.col("nbr")
    current = [_state_hash().alias("state"), F.coalesce("vleaf", "leaf").alias("vleaf"),
               F.coalesce("npred", F.lit(ctx.overlay.ring.leaf_set // 2)).alias("npred"), dead.alias("dead"),
               entry.alias("entry"), F.when(entry >= 0, none).otherwise(table).alias("rt"),
               F.when(entry >= 0, none).otherwise(nbr).alias("nbr")]

    emitted = {"done": lambda f: f.filter("done"),
               "sends": lambda f: f.filter(F.col("sent") > 0).select("lid", "sent"),
               "reads": _reads,
               "declared": lambda f: _declared(f, rto, until)}
    if joins:
        last = F.col("outcome").isin("correct", "wrong")
        emitted = {"declared": emitted["declared"],
                   "replies": lambda f: f.filter("replied").select("lid", F.col("read_at").alias("z"),
                                                                   F.col("read_t").alias("t"), "hops",
                                                                   last.alias("last")),
                   "join_sends": lambda f: f.filter(F.col("sent") > 0).select("lid",
                                                                              F.col("read_t").alias("t"))}

    def step(msgs: DataFrame, k: int, n: int) -> bsp.Split:
        read = bsp.as_of(msgs, "at", "t", versions)
        read = read.join(state, read["at"] == state["_sid"]).select(*names, *current)
        if ctx.holders is not None:
            read = _stops(ctx, read)
        return bsp.Split(read.mapInArrow(task, STEP_SCHEMA),
                         inflight=lambda f: f.filter(~F.col("done")).select(*names), emitted=emitted)
    return bsp.run("timed lookups", lookups, step, bound=10 * ctx.max_attempts + 10, unit="lookups",
                   unsized=True)


def _entry_at(slot: Column, rt: str, returns: bool) -> Column:
    """A version's table entry at `slot`: refilled, else the table `rt` started with (-1: empty); the
    caller leaves out the nodes known dead (`_remembered`: with returns, those no longer dead too)."""
    converged = _remembered(F.try_element_at(rt, slot + 1), returns)
    return F.coalesce(F.try_element_at(_fills(), slot), converged, F.lit(-1))


def _remembered(entry: Column, returns: bool) -> Column:
    """A converged table entry, or -1 if it names a node once known dead (its entries were emptied); in a
    run without returns no such node is alive again, and the dead ones are left out by the caller."""
    if not returns:
        return entry
    return F.when(F.array_contains(F.coalesce("forgot", F.array().cast(NODES)), entry), -1).otherwise(entry)


def _fills() -> Column:
    """A version's refilled table slots as a map slot -> node (empty for the converged state)."""
    return F.map_from_arrays(F.coalesce("fslot", F.array().cast(T.ArrayType(T.IntegerType()))),
                             F.coalesce("fnode", F.array().cast(NODES)))


def _reads(f: DataFrame) -> DataFrame:
    """The states the superstep's lookups read: where, when and the state's hash."""
    return f.filter(F.col("read_at") >= 0).select("lid", F.col("read_at").alias("at"),
                                                  F.col("read_t").alias("t"), "state")


def _state_hash() -> Column:
    """A hash of the version read: its leaf set, the split, the nodes known dead, the table slots refilled
    and the nodes no longer dead (all null, the converged state, hash to one constant)."""
    return F.xxhash64("vleaf", "npred", "dead", "fslot", "fnode", "forgot")


def _declared(f: DataFrame, rto: float, until: float) -> DataFrame:
    """The declarations the superstep's timeouts make, rto_ms after each send to a dead node."""
    return (f.filter(F.col("declared") >= 0)
            .select("lid", F.col("at").alias("node"), F.col("t").alias("t"), F.lit(TIMER).alias("prio"),
                    (F.col("t") - rto).alias("set_t"), F.lit(BY_HANDLER).alias("set_by"),
                    F.lit(AFTER_HANDLER).alias("ord"), F.lit(LOOKUP).alias("kind"),
                    F.col("declared").alias("other"),
                    F.array().cast(NODES).alias("members"))
            .filter(F.col("t") < until))


def _route_task(ctx: _Context) -> Callable:
    """The lookup superstep's Python task: limits, then the routing rule on the state read."""
    ring_bc, downs_bc, tm, until, cap = ctx.ring_bc, ctx.downs_bc, ctx.timers, ctx.until, ctx.max_attempts
    out_schema = to_arrow_schema(STEP_SCHEMA)

    def _(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ring, downs = ring_bc.value, downs_bc.value
        for col in batch_columns(batches):
            yield _route_batch(ring, downs, tm, until, cap, col, out_schema)
    return _


def _route_batch(ring: Ring, downs: Downs, tm: Timers, until: float, cap: int, col: dict,
                 schema: pa.Schema) -> pa.RecordBatch:
    """One superstep for a batch of lookups joined with their nodes' states."""
    m = pd.DataFrame({f.name: col[f.name].to_numpy(zero_copy_only=False) for f in LOOKUP_SCHEMA.fields
                      if f.name != "avoid"})
    at, t = m["at"].to_numpy(np.int64), m["t"].to_numpy(np.float64)
    via = m["via"].to_numpy(np.int32)
    waited = via == TIMEOUT
    # a lookup that waited for a timeout is lost if its node went down meanwhile, even if back by now
    down_now = downs.is_down(at, t)
    dead_now = down_now | (waited & downs.went_since(at, t - tm.rto_ms, t))
    # a hop or a timeout counts when its arrival is handled: before `until`, at a live node
    timeouts = m["timeouts"].to_numpy(np.int32) + (waited & ~dead_now & (t < until))
    hops = m["hops"].to_numpy(np.int32) + ((via == HOP) & (t < until))
    outcome = np.full(len(m), "", dtype=object)
    outcome[t >= until] = "unfinished"
    open_ = outcome == ""
    outcome[open_ & dead_now] = np.where(waited, "lost", "not_issued")[open_ & dead_now]
    open_ = outcome == ""
    # a SUBSCRIBE that reached a node holding its topic stops there (Scribe's forward upcall), before limits
    grafted = open_ & (via == HOP) & (col["stop"].to_numpy(zero_copy_only=False) if "stop" in col else False)
    outcome[grafted] = "grafted"
    open_ = outcome == ""
    over = (t > m["t_issue"].to_numpy() + tm.lookup_timeout_ms) | (hops + timeouts >= cap)
    outcome[open_ & over] = "lost"
    go = np.flatnonzero(outcome == "")
    nxt = np.full(len(m), -1, np.int64)
    khi, klo = as_u64(col["key_hi"]), as_u64(col["key_lo"])
    if len(go):
        nxt[go] = _next_hops(ring, col, go, khi, klo, at)
    read = grafted.copy()   # a SUBSCRIBE's last hop is on its way, though not routed on
    read[go] = True
    stays = np.zeros(len(m), bool)
    stays[go] = nxt[go] == at[go]
    replied = read & ((via != TIMEOUT) | stays)   # a JOIN's node replies on its arrival, or where it ends
    if stays.any():
        right = closest_alive_at(ring, downs, khi[stays], klo[stays], t[stays]) == at[stays]
        outcome[stays] = np.where(right, "correct", "wrong")
    moves = np.flatnonzero((outcome == "") & ~stays)
    arrive = (t[moves] + ring.prox.dist(at[moves], nxt[moves]).astype(np.float64)) + tm.proc_ms
    lost_hop, life_at_arrival = downs.at(nxt[moves], arrive)
    declared = np.full(len(m), -1, np.int64)
    declared[moves[lost_hop]] = nxt[moves[lost_hop]]
    new_at, new_t, new_via = at.copy(), t.copy(), via.copy()
    found = np.zeros(len(m), bool)
    # the lookup avoids the node it found dead only if that node is not back by the timeout: then its
    # node cannot have heard it is back, and declares it; else the state read at the timeout decides
    back = downs.incarnation(nxt[moves], t[moves] + tm.rto_ms) != life_at_arrival
    found[moves[lost_hop & ~back]] = True
    cleared = np.zeros(len(m), bool)
    cleared[moves[~lost_hop]] = True
    new_at[moves] = np.where(lost_hop, at[moves], nxt[moves])
    new_t[moves] = np.where(lost_hop, t[moves] + tm.rto_ms, arrive)
    new_via[moves] = np.where(lost_hop, TIMEOUT, HOP)
    slot = m["slot"].to_numpy(np.int32).copy()
    hop = moves[~lost_hop]
    slot[hop] = kernels.table_slot(ring, khi[hop], klo[hop], nxt[hop])[1]
    done = outcome != ""
    sent = np.zeros(len(m), np.int32)
    sent[moves] = 1
    out = {
        "lid": m["lid"], "t_issue": m["t_issue"], "key_hi": m["key_hi"], "key_lo": m["key_lo"],
        "at": new_at, "t": new_t, "hops": hops, "timeouts": timeouts,
        "via": new_via, "avoid": _avoided(col["avoid"], found, cleared, nxt, downs, t, new_t,
                                                 schema.field("avoid").type),
        "slot": slot, "state": col["state"].to_numpy(), "read_at": np.where(read, at, -1), "read_t": t,
        "done": done, "outcome": np.where(done, outcome, ""),
        "dest": np.where(np.isin(outcome, ("correct", "wrong", "grafted")), at, -1), "sent": sent,
        "declared": declared,
        "replied": replied}
    return pa.RecordBatch.from_arrays([out[f.name] if isinstance(out[f.name], pa.Array)
                                       else pa.array(np.asarray(out[f.name]), type=f.type) for f in schema],
                                      schema=schema)


def _avoided(avoid: pa.ListArray, found: np.ndarray, cleared: np.ndarray, nxt: np.ndarray, downs: Downs,
             t_was: np.ndarray, t: np.ndarray, kind: pa.DataType) -> pa.ListArray:
    """Each lookup's nodes found dead at its node, for its next read at t: the next hop added where it was
    found dead, none where the lookup moved on, and only those not back since its read at t_was (each
    still down then; one back may have said so to the node since: its state tells)."""
    vals, offs = values_offsets(avoid)
    lens = np.diff(offs)
    row = np.repeat(np.arange(len(lens)), lens)
    keep = ~cleared[row] & (downs.incarnation(vals, t[row]) == downs.incarnation(vals, t_was[row]))
    row, vals = row[keep], vals[keep]
    kept = np.bincount(row, minlength=len(lens))
    before = np.zeros(len(lens) + 1, np.int64)   # the kept values of the rows before each
    np.cumsum(kept, out=before[1:])
    new_offs = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(kept + found, out=new_offs[1:])
    out = np.empty(int(new_offs[-1]), np.int64)
    out[new_offs[:-1][row] + np.arange(len(vals)) - before[row]] = vals
    add = np.flatnonzero(found)
    out[new_offs[add] + kept[add]] = nxt[add]
    offsets = pa.array(new_offs.astype(np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(out, kind.value_type), type=kind)


def _next_hops(ring: Ring, col: dict, rows: np.ndarray, khi, klo, at) -> np.ndarray:
    """The routing rule at each of `rows`' nodes, on the version read (the converged state if none).

    The nodes a row's version knows dead, and those its lookup found dead at this node (in the state
    at the fixed point, maybe not yet in an earlier pass), are taken out of its leaf set, routing
    table and neighbourhood set, all rows at once.
    """
    n, half = ring.n, ring.leaf_set // 2
    pick = np.zeros(len(at), bool)
    pick[rows] = True
    gone = np.concatenate([_keyed(col["dead"], pick, n), _keyed(col["avoid"], pick, n)])
    leaf_vals, leaf_keys, leaf_offs = _picked(col["vleaf"], pick, n)
    gone = np.unique(gone)
    leaf = _padded_sides(leaf_vals, leaf_offs, ~_within(leaf_keys, gone), col["npred"].to_numpy()[rows],
                         at[rows], half)
    rt_vals, rt_keys, rt_offs = _picked(col["rt"], pick, n)
    rt_vals = np.where(_within(rt_keys, gone), -1, rt_vals)
    nbr_vals, nbr_keys, nbr_offs = _picked(col["nbr"], pick, n)
    nbr_vals, nbr_offs = _kept(nbr_vals, nbr_offs, ~_within(nbr_keys, gone))
    nxt, rule = kernels.route_step(ring, khi[rows], klo[rows], at[rows], leaf.ravel(),
                                   np.arange(len(rows) + 1, dtype=np.int64) * 2 * half, rt_vals, rt_offs,
                                   nbr_vals, nbr_offs, entry=col["entry"].to_numpy().astype(np.int64)[rows])
    return np.where(rule == kernels.DELIVERED, at[rows], nxt)


def _within(keys: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Which keys are in a sorted array of distinct values (np.isin, without sorting the keys)."""
    if len(sorted_set) == 0:
        return np.zeros(len(keys), bool)
    at = np.minimum(np.searchsorted(sorted_set, keys), len(sorted_set) - 1)
    return sorted_set[at] == keys


def _picked(a: pa.ListArray, pick: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The picked rows of a list column: values, values keyed by (picked row, node), offsets."""
    vals, offs = values_offsets(a)
    lens = np.diff(offs)
    row = np.repeat(np.arange(len(lens)), lens)
    keep = pick[row]
    new_row = np.cumsum(pick) - 1
    sub = vals[keep]
    sub_offs = np.zeros(int(pick.sum()) + 1, dtype=np.int64)
    np.cumsum(lens[pick], out=sub_offs[1:])
    return sub, new_row[row[keep]] * n + sub, sub_offs


def _keyed(a: pa.ListArray, pick: np.ndarray, n: int) -> np.ndarray:
    """A list column's values of the picked rows, keyed by (picked row, node)."""
    return _picked(a, pick, n)[1]


def _kept(vals: np.ndarray, offs: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ragged rows with only the values where `keep`."""
    row = np.repeat(np.arange(len(offs) - 1), np.diff(offs))
    out = np.zeros(len(offs), dtype=np.int64)
    np.cumsum(np.bincount(row[keep], minlength=len(offs) - 1), out=out[1:])
    return vals[keep], out


def _padded_sides(vals: np.ndarray, offs: np.ndarray, keep: np.ndarray, npred: np.ndarray, at: np.ndarray,
                  half: int) -> np.ndarray:
    """Leaf sets as the routing rule reads them, one row of L per node: the kept predecessors then the
    kept successors, nearest first, a short side padded with its farthest member (or the node itself)."""
    rows = len(offs) - 1
    row = np.repeat(np.arange(rows), np.diff(offs))
    side = ((np.arange(len(vals)) - offs[row]) >= npred[row]).astype(np.int64)
    row, side, vals = row[keep], side[keep], vals[keep]
    group = row * 2 + side
    count = np.bincount(group, minlength=2 * rows)
    start = np.zeros(2 * rows, dtype=np.int64)
    np.cumsum(count[:-1], out=start[1:])
    rank = np.arange(len(vals)) - start[group]
    out = np.empty((rows, 2 * half), dtype=np.int64)
    out[row, side * half + rank] = vals
    for s in (0, 1):
        c = count[s::2]
        last = np.where(c > 0, out[np.arange(rows), s * half + np.maximum(c - 1, 0)], at)
        pad = np.arange(half)[None, :] >= c[:, None]
        block = out[:, s * half:(s + 1) * half]
        block[pad] = np.broadcast_to(last[:, None], block.shape)[pad]
    return out


def closest_alive_at(ring: Ring, downs: Downs, khi, klo, t: np.ndarray) -> np.ndarray:
    """The node numerically closest to each key among those alive at its time."""
    n = ring.n
    i = ids.searchsorted(ring.shi, ring.slo, khi, klo)
    up, down = i.copy(), i - 1
    for pos, step in ((up, 1), (down, -1)):
        todo = np.flatnonzero(downs.is_down(ring.order[pos % n], t))
        while len(todo):
            pos[todo] += step
            todo = todo[downs.is_down(ring.order[pos[todo] % n], t[todo])]
    succ, pred = ring.order[up % n], ring.order[down % n]
    succ_wins = ids.closer(ring.hi[succ], ring.lo[succ], ring.hi[pred], ring.lo[pred], khi, klo)
    return np.where(succ_wins, succ, pred)


# ---------------------------------------------------------------- joins (`timed_joins`)

def _joins(ctx: _Context, events: DataFrame, versions: DataFrame) -> DataFrame:
    """This pass's joins on these versions: the tries the BUILT and TRIED events given show, their contacts
    and JOIN routes, and what each try settles to (a BUILT or TRIED event), with the JOINs' declarations."""
    spark, ring, tm = events.sparkSession, ctx.overlay.ring, ctx.timers
    given = events.filter(F.col("kind").isin(*tj.GIVEN)).select("node", "kind", "t", "set_t").toPandas()
    tries, waits = tj.plan(ctx.downs, ctx.newcomers, tm.lookup_timeout_ms, ctx.until, given)
    contacts = [tj.contact(ring, ctx.downs, tm, ctx.until, tr, waits) for tr in tries]
    entered = [i for i, c in enumerate(contacts) if c.at is not None]
    x = np.array([tries[i].x for i in entered], np.int64)
    frame = pd.DataFrame({"t_issue": [tries[i].t for i in entered], "src": [contacts[i].at for i in entered],
                          "key_hi": ring.hi[x], "key_lo": ring.lo[x]})
    joins = _lookup_frame(spark, ring, frame, first=ctx.lookups_n, t=[contacts[i].t for i in entered],
                          timeouts=[contacts[i].timeouts for i in entered])
    routed = _route(ctx, joins, versions, joins=True).emitted
    replies = _reply_states(ctx, routed.get("replies"), versions)
    sends = (routed["join_sends"].toPandas() if "join_sends" in routed
             else pd.DataFrame({"lid": [], "t": []}))
    out, log = [], _JoinLog(tries, contacts, replies, sends)
    lid = {i: ctx.lookups_n + j for j, i in enumerate(entered)}
    for i, tr in enumerate(tries):
        mine = replies[replies.lid == lid[i]] if i in lid else replies.iloc[:0]
        got = tj.settle(ring, tm, ctx.until, tr, mine)
        if got is not None:
            t, (pred, succ, fills) = got
            out.append((tr.x, t, MESSAGE, tr.t, BY_HANDLER, 0, tj.BUILT, -1,
                        [len(pred), len(succ), *pred, *succ, *(v for s in fills.items() for v in s)]))
            log.built.append((tr.x, t))
        else:
            again = tr.t + tm.lookup_timeout_ms
            if again < tr.life_end and again < ctx.until:
                out.append((tr.x, again, TIMER, tr.t, BY_HANDLER, 0, tj.TRIED, -1, []))
                log.lost.append((tr.x, again))
    ctx.joins = log
    made = local_frame(spark, pa.Table.from_pylist([dict(zip(EVENT_SCHEMA.names, r)) for r in out],
                                                   schema=to_arrow_schema(EVENT_SCHEMA)), EVENT_SCHEMA)
    declared = routed.get("declared")
    return made if declared is None else made.unionByName(declared.drop("lid"))


def _reply_states(ctx: _Context, replies: DataFrame | None, versions: DataFrame) -> pd.DataFrame:
    """The JOIN replies (lid, z, t, hops, last) with the state z had then: its leaf set and its whole table
    (refilled slots, taken-in newcomers, without the nodes it knows dead or once knew dead)."""
    cols = ["lid", "z", "t", "hops", "last", "leaf", "table"]
    if replies is None:
        return pd.DataFrame({c: [] for c in cols})
    base = ctx.base.select(F.col(ID).alias("z"), F.col("leaf").alias("conv"), "rt")
    read = bsp.as_of(replies, "z", "t", versions).join(base, "z")
    dead = F.coalesce("dead", F.array().cast(NODES))
    return read.select("lid", "z", "t", "hops", "last", F.coalesce("vleaf", "conv").alias("leaf"),
                       _whole_table(ctx, ctx.returns, dead).alias("table")).toPandas()


def _whole_table(ctx: _Context, returns: bool, dead: Column | None = None) -> Column:
    """A version's routing table in whole rows: the table `rt` started with, the refilled and taken-in
    slots over it (a table grows by whole rows to hold them), -1 where empty (and for the nodes `dead`
    lists)."""
    cols = 1 << ctx.overlay.ring.b
    filled = F.coalesce(F.array_max("fslot") + 1, F.lit(0))
    size = F.greatest(F.size("rt"), F.ceil(filled / cols).cast(T.IntegerType()) * cols)

    def entry(i: Column) -> Column:
        e = _entry_at(i, "rt", returns)
        return e if dead is None else F.when(F.array_contains(dead, e), -1).otherwise(e)
    return F.when(size > 0, F.transform(F.sequence(F.lit(0), size - 1), entry)).otherwise(
        F.array().cast(NODES))


@dataclass
class _JoinLog:
    """What a pass's joins did: the tries, their contacts, the JOINs' replies and sends, builds, retries."""

    tries: list[tj.Try]
    contacts: list[tj.Contact]
    replies: pd.DataFrame   # lid, z, t (sent), hops, last, leaf, table
    sends: pd.DataFrame     # lid, t: each JOIN forwarded
    built: list[tuple[int, float]] = field(default_factory=list)   # (newcomer, t)
    lost: list[tuple[int, float]] = field(default_factory=list)    # (newcomer, t it tries again)

    def sent(self) -> dict[str, np.ndarray]:
        """When each JOIN and each reply was sent."""
        to_contacts = [t for c in self.contacts for t in c.sends]
        return {"join": np.r_[np.asarray(to_contacts, np.float64), self.sends.t.to_numpy(np.float64)],
                "join_reply": self.replies.t.to_numpy(np.float64)}


# ---------------------------------------------------------------- the result

def _result(ctx: _Context, last: bsp.Pass, passes: int) -> TimedRun:
    """Gather the fixed point's lookups, logs and message counts."""
    f = last.frames
    done = f["done"].select("lid", "outcome", "dest", F.col("t").alias("t_done"), "hops", "timeouts",
                            "t_issue").toPandas().sort_values("lid").reset_index(drop=True)
    bad = ~done.outcome.isin(("correct", "wrong", "lost", "grafted"))
    done["latency_ms"] = np.where(bad, np.nan, done.t_done - done.t_issue)
    done.loc[done.outcome.isin(("not_issued", "unfinished")), "t_done"] = np.nan
    log = f["log"].filter(F.col("kind") != "version").toPandas()
    detections = log[log.kind == "detected"].rename(columns={"a": "failed", "node": "detector"})
    starts = log[log.kind == "repair_start"].rename(columns={"a": "failed", "b": "asked"})
    repairs = log[log.kind == "repaired"]
    asks = log[log.kind == "table_ask"].rename(columns={"a": "slot", "b": "asked"})
    filled = log[log.kind == "table_repaired"].rename(columns={"a": "slot", "b": "entry"})
    messages, maintenance = _messages(ctx, last, log)
    joined = lost = None
    if ctx.joins is not None:
        joined, lost = (pd.DataFrame(rows, columns=["node", "t"], dtype=object).astype({"node": np.int64,
                                                                                       "t": np.float64})
                        for rows in (ctx.joins.built, ctx.joins.lost))
    return TimedRun(done.drop(columns="t_issue"),
                    detections[["failed", "detector", "t"]].reset_index(drop=True),
                    starts[["node", "failed", "asked", "t"]].reset_index(drop=True),
                    repairs[["node", "t"]].reset_index(drop=True), messages, maintenance, passes,
                    asks[["node", "slot", "asked", "t"]].reset_index(drop=True),
                    filled[["node", "slot", "entry", "t"]].reset_index(drop=True), joined, lost,
                    _paths(ctx, f["reads"]))


def _paths(ctx: _Context, reads: DataFrame) -> pd.DataFrame | None:
    """The SUBSCRIBEs' hops (lid, i, node, t): where each read a state, once per arrival (a timeout's
    reading again where it waited is no hop), hop 0 its source at its issue (None: no SUBSCRIBEs)."""
    if ctx.subscribes is None:
        return None
    r = (reads.filter(F.col("lid") >= ctx.subscribes).select("lid", F.col("at").alias("node"), "t").toPandas()
         .astype({"lid": np.int64, "node": np.int64, "t": np.float64})
         .sort_values(["lid", "t"], kind="stable"))
    r = r[(r.lid != r.lid.shift()) | (r.node != r.node.shift())]
    return r.assign(i=r.groupby("lid").cumcount().astype(np.int64))[["lid", "i", "node", "t"]].reset_index(
        drop=True)


def _messages(ctx: _Context, last: bsp.Pass, log: pd.DataFrame) -> tuple[Counter, pd.DataFrame]:
    """Messages sent by kind: in all, lookups included, and maintenance per bin by sending time; `log` is
    the fold's log without the versions (its requests: node, b the node asked, t)."""
    bins = Bins(ctx.until, ctx.bin_ms)
    probes, replies = _probe_counts(ctx, last.frames["versions"], bins)
    left = _leave_notices(ctx, last.frames["versions"]).select("t").toPandas().t.to_numpy(np.float64)
    binned = pd.DataFrame({"t_ms": bins.starts, "probe": probes, "probe_reply": replies})
    requests = {("leaf_request", "leaf_reply"): LEAF_ASKS,
                ("table_request", "table_reply"): ("table_ask",)}
    if ctx.returns:
        requests[("rejoin", "rejoin_reply")] = ("rejoin",)
    for (ask, reply), kinds in requests.items():
        sent = log[log.kind.isin(kinds)]
        x, z, t = (sent[c].to_numpy(k) for c, k in (("node", np.int64), ("b", np.int64), ("t", np.float64)))
        t_a, _t_r, answered = _request_times(ctx.overlay.ring, ctx.downs, ctx.timers, ctx.until, x, z, t)
        binned[ask], binned[reply] = bins.count(t), bins.count(t_a[answered])
    binned["leave"] = bins.count(left)
    kinds = MAINTENANCE
    if ctx.returns:
        binned["announce"] = bins.count(log[log.kind == "announce"].t.to_numpy(np.float64))
        kinds += RECOVERY
    if ctx.joins is not None:
        sent = {**ctx.joins.sent(), "join_announce": log[log.kind == "join_announce"].t.to_numpy(np.float64)}
        for kind in JOINING:
            binned[kind] = bins.count(sent[kind])
        kinds += JOINING
    lookup = int(last.frames["sends"].agg(F.sum("sent")).first()[0] or 0)
    total = Counter({kind: int(binned[kind].sum()) for kind in kinds})
    total["lookup"] = lookup
    return total, binned


@dataclass(frozen=True)
class Bins:
    """Bins [k width, (k + 1) width) of simulated time up to `until`; one bin for the run if no width."""

    until: float
    width: float | None

    @property
    def n(self) -> int:
        """How many bins (a quotient a rounding above a whole number adds none)."""
        return max(1, math.ceil(self.until / self.width - 1e-9)) if self.width else 1

    @property
    def starts(self) -> np.ndarray:
        """Each bin's start."""
        return np.arange(self.n, dtype=np.float64) * (self.width or 0.0)

    def of(self, t: np.ndarray) -> np.ndarray:
        """Each time's bin (all times before `until`; the last bin takes what rounds past it)."""
        t = np.asarray(t, np.float64)
        at = (t // self.width).astype(np.int64) if self.width else np.zeros(len(t), np.int64)
        return np.minimum(at, self.n - 1)

    def count(self, t: np.ndarray) -> np.ndarray:
        """How many of the times (all before `until`) fall in each bin."""
        return np.bincount(self.of(t), minlength=self.n).astype(np.int64)


def _probe_counts(ctx: _Context, versions: DataFrame, bins: Bins) -> tuple[np.ndarray, np.ndarray]:
    """Probes sent and answered per bin, per (node, version, member) in closed form."""
    ring_bc, downs_bc, tm, seed, until = ctx.ring_bc, ctx.downs_bc, ctx.timers, ctx.seed, ctx.until

    def _(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        ring, downs = ring_bc.value, downs_bc.value
        for df in frames:
            probes, replies = _probes_answered(ring, downs, tm, seed, until, bins, df)
            some = np.flatnonzero(probes | replies)
            yield pd.DataFrame({"bin": some, "probes": probes[some], "replies": replies[some]})
    counts = (_members(ctx, versions).mapInPandas(_, "bin long, probes long, replies long")
              .groupBy("bin").agg(F.sum("probes").alias("probes"), F.sum("replies").alias("replies"))
              .toPandas().set_index("bin").reindex(np.arange(bins.n), fill_value=0))
    return counts.probes.to_numpy(np.int64), counts.replies.to_numpy(np.int64)


def _probes_answered(ring: Ring, downs: Downs, tm: Timers, seed: int, until: float, bins: Bins,
                     df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per bin: probes x sends to y at its ticks in [t_from, t_to) while up, and y's replies (to the probes
    that reach y up, before the end)."""
    x, y = df.x.to_numpy(np.int64), df.y.to_numpy(np.int64)
    phase = keepalive_phase(x, seed, tm.keepalive_ms)
    d = ring.prox.dist(x, y).astype(np.float64)
    period = tm.keepalive_ms
    t_from = df.t_from.to_numpy(np.float64)
    end = np.minimum(np.minimum(df.t_to.to_numpy(np.float64), until), downs.cut(x, t_from))
    lo = first_ticks(phase, period, lambda s, i: s >= t_from[i], guess_ticks(t_from, phase, period))
    hi = first_ticks(phase, period, lambda s, i: s >= end[i], guess_ticks(end, phase, period), floor=lo)

    def reaching(rows: np.ndarray, limit: np.ndarray, floor: np.ndarray) -> np.ndarray:
        """Per row of `rows`, the first tick from `floor` whose probe arrives at or after `limit`."""
        p, dd = phase[rows], d[rows]
        return first_ticks(p, period, lambda s, i: (s + dd[i]) + tm.proc_ms >= limit[i],
                           (limit - dd - tm.proc_ms - p) / period, floor=floor)
    first, sent = lo.astype(np.int64), (hi - lo).astype(np.int64)
    if bins.n == 1:   # counted without the ticks: those before the end less those that reach y down
        stop = reaching(np.arange(len(y)), np.full(len(y), until), lo)
        row, t_down, t_up = downs.of_nodes(y)   # each time y is down
        gone = reaching(row, np.minimum(t_down, until), lo[row])
        back = reaching(row, np.minimum(t_up, until), gone)
        lost = np.maximum(np.minimum(np.minimum(back, hi[row]), stop[row]) - gone, 0).sum()
        answered = np.maximum(np.minimum(hi, stop) - lo, 0).sum() - lost
        return np.array([sent.sum()], np.int64), np.array([answered], np.int64)
    probes, replies = np.zeros(bins.n, np.int64), np.zeros(bins.n, np.int64)
    cut = np.searchsorted(np.cumsum(sent), np.arange(1, sent.sum() // TICKS_AT_ONCE + 1) * TICKS_AT_ONCE)
    for rows in np.split(np.arange(len(df)), np.unique(cut)):   # the ticks of a few rows at a time
        row = np.repeat(rows, sent[rows])
        k = first[row] + (np.arange(len(row)) - np.repeat(np.cumsum(sent[rows]) - sent[rows], sent[rows]))
        ticks = phase[row] + k * period
        arrive = (ticks + d[row]) + tm.proc_ms
        up = (arrive < until) & ~downs.is_down(y[row], arrive)
        probes += bins.count(ticks)
        replies += bins.count(arrive[up])
    return probes, replies
