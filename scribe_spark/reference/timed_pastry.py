"""A plain sequential Pastry in simulated time: keep-alives, failure detection, leaf-set repair and lookups.

One heap of timed events, processed one at a time, with no Spark: the independent reference a
bulk-synchronous version of the same protocol is checked against, so it follows the model below
literally and deterministically (the same inputs give the same outputs, to the last float).

**Time and events.** Time is in milliseconds. Events are ordered by (time, priority, sequence):
priority 0 is a crash, 1 a message arriving, 2 a timer (a keep-alive tick, a probe or request
timeout, a lookup's retransmission timeout, a lookup being issued); the sequence number counts events
in the order they are created. So a message arriving at a node at the very time it crashes finds it
dead, and a reply arriving at the very time its timer expires counts as in time. Events at or after
`until_ms` are not processed.

**Messages.** A message sent from u to v at time t arrives at t + link_ms(u, v) + proc_ms. Every
message is counted when it is sent, by kind: probe, probe_reply, leaf_request, leaf_reply,
table_request, table_reply, leave, rejoin, rejoin_reply, announce, join, join_reply, join_announce,
lookup (also a LOOKUP or JOIN sent to a dead node). A reply is sent only when its request's arrival
is processed, so a probe arriving at or after `until_ms` has no reply counted.

**State.** Every node starts from the converged state of the kernels (`kernels.leaf_sets`,
`routing_tables`, `neighborhood_sets`): a leaf set of L/2 predecessors nearest first, then L/2
successors nearest first; a flat routing table (-1 empty); a neighbourhood set; and the set of
nodes it knows dead, empty. The ring must have more than L nodes, so that the two sides are disjoint.
Nodes given as *absent* are down from before time starts (each must go down at -inf) and in no other
node's state: the others start from the converged state of the overlay they form alone (more than L
of them), and an absent node holds, for when it comes back, its converged state with every node in.
Nodes crash at the times given (joins: below): a crashed node processes nothing, the messages arriving
at it are dropped and its timers do nothing, until it recovers, if it does (below). A node that leaves
gracefully at a time given first sends a LEAVE to every member of its current leaf set, then stops as
a crashed node does; a live member that receives it declares the leaver failed at once (below).

**Recovery.** A node that crashed or left may come back at a time given (and go down and come back
again, as often as the times given say; each return is the same), with the same id and the
leaf set, routing table and neighbourhood set it had when it went down, but knowing no node dead (who
died or came back meanwhile it cannot know). Its timers and requests from before do nothing: each node
has an incarnation, which a recovery starts anew, and a timer or reply of an earlier one is ignored (a
lookup it held when it went down is lost at its timeout). It ticks again from its first tick at or
after its recovery, and sends a REJOIN to every member of its last known leaf set, with a timer T_fd
later as a leaf-set request has. A live member m that receives it *welcomes* x: x is no longer dead to
m, and m takes it into its leaf set if it is among the L/2 nearest of its side (the merge below, with x
as the one candidate beside m's leaf set); then m answers with a REJOIN_REPLY holding its leaf set,
which x merges as a LEAF_REPLY (not logged as a repair). After each merge x sends an ANNOUNCE to
every member of its leaf set it has not sent a REJOIN or ANNOUNCE to since it recovered, and a live
receiver welcomes x. A member that does not answer the REJOIN by the timer is declared failed. A node
is not declared failed by the timer of a probe, request or lookup sent to it before it said it was
back to the node that sent it: a leaf-set request (or REJOIN) is then sent to it again as a
LEAF_REQUEST, and a lookup routed again. A node whose last leaf set is all down when it recovers
ends with an empty leaf set, and no one learns it is back (the model has no other way back in).

**Joins.** A node absent from the start may come in as a newcomer instead, by Pastry's join, in its
first life (`run`'s `newcomers`; `timed_joins` has the protocol).

**Keep-alives.** Node x ticks at phase_x + k T_ka (k = 0, 1, ...). At each tick a live x sends a
PROBE to every member of its current leaf set and sets a timer T_fd later for each; a live member
answers at once with a PROBE_REPLY. If the reply to that very probe has not arrived by the timer
and the member is still in x's leaf set, x declares it failed then. T_fd (and rto_ms) should exceed
a round trip (twice the largest link delay plus proc_ms), or live nodes are declared failed; the
simulator does not check it.

**Declaring y failed at x** (once per pair: a node already known dead is not declared again):
x adds y to the nodes it knows dead, drops y from its leaf set (the other members of that side
keep their order, and the side is one shorter), empties every routing-table entry naming y and
drops y from its neighbourhood set; the detection (y, x, y's last going at or before t or None, t)
is logged. If y was in the routing table and a lookup found it dead, x starts that entry's repair
(below, after the leaf set's). If y
was in the leaf set, x starts a repair: it sends a LEAF_REQUEST to z, the farthest member of the
leaf set's side that held y (the farthest of the other side if that one is now empty; no repair if
the leaf set is empty), and sets a timer T_fd later. A live z answers at once with a LEAF_REPLY
holding a copy of its leaf set. If no reply to that request has arrived by the timer, x declares z
failed, which may start another repair. Until the repair lands, the routing rule reads a short
side padded with its farthest remaining member (or the node itself if none is left), so the range
test keeps that side's bound, as in the failure model of the untimed experiments.

**Routing-table repair**, lazy as in Pastry: only an entry a lookup found dead is refilled.
Declaring y failed empties the routing-table entry (r, c) naming y (a node fits one entry only); if
the declaration came from a lookup's timeout, x starts that entry's repair: it sends a TABLE_REQUEST
for (r, c) to the entry of its row r that is nearest to it by link delay (ties to the lower node
number), among the non-empty entries it has not asked in this repair; if row r has none left, the
same in row r + 1, and so on to the last row (those nodes share the first r digits with x too, so
their entry (r, c) is one x may hold); with no one left to ask the entry stays empty. It sets a
timer T_fd later. A live asked node w answers at once with a TABLE_REPLY holding its own entry (r,
c) (-1 if empty). If the reply arrives by the timer (at its very time counts), names a node (not x,
not one x knows dead) and the entry is still empty, x puts that node there and the repair ends
(logged as (x, slot, node, t), the slot being r 2^b + c); any other reply makes x ask the next node
as above. If no reply has arrived by the timer, x declares w failed (which empties w's own entry,
not repaired: no lookup found it dead) and asks the next node. A late reply is ignored. x waits for one
answer per entry: a repair of the entry begun while another is under way (a lookup found dead a node
that filled it meanwhile) starts afresh and waits for its own request instead (for the one under way if
it finds nobody to ask), and an answer or timer of a node it no longer waits for is ignored. An entry
emptied by any other declaration (a keep-alive, a leave notice, an unanswered request) stays empty:
such nodes are mostly leaf-set members, in deep rows whose slot often has no other candidate, and
the leaf set routes there.

**Repair.** On a LEAF_REPLY from z, a live x takes the candidates (its leaf set, the reply and z,
without x and the nodes it knows dead), puts each on the side of x it is nearer on by ring
position (clockwise on a tie) and keeps the L/2 nearest of each side, nearest first: the converged
layout when every node is a candidate. The repair (x, t) is logged.

**Lookups** (t_issue, src, key). A lookup whose source is dead at t_issue is not issued. At a node
u at time t the lookup first checks its limits: it is lost (at t) if t > t_issue + lookup_timeout_ms
or hops + timeouts >= max_attempts. Else u applies the routing rule (`kernels.route_step`) to its
state as it is at t: delivered there, or a LOOKUP is sent to the next node v. If v is alive when it
arrives, v takes it at the arrival (one hop more). If v is dead by then (crashed at or before the
arrival), u learns it rto_ms after sending: it declares v failed (a leaf-set member found dead
this way starts a repair too), counts a timeout and applies the rule again at that time. If u itself
has crashed by then, the lookup is lost at that time. A delivered lookup is correct when it ends at
the numerically closest node alive at the delivery time (`closest_live`), else wrong. A lookup still
under way at `until_ms`, or issued at or after it, is unfinished.
"""
from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from scribe_spark.pastry import kernels
from scribe_spark.pastry.kernels import Ring
from scribe_spark.reference.closest import closest_live
from scribe_spark.reference.timed_joins import Joins
from scribe_spark.sessions import Times, outages

CRASH, MESSAGE, TIMER = 0, 1, 2   # event priorities at equal times
OUTCOMES = ("correct", "wrong", "lost", "not_issued", "unfinished")
Lookup = tuple[float, int, int, int]   # (t_issue, src, key_hi, key_lo)


@dataclass(frozen=True)
class TimedParams:
    """The protocol's timing: keep-alive period, failure timeout, retransmission timeout and hop cost (ms)."""

    keepalive_ms: float
    failure_timeout_ms: float
    rto_ms: float
    proc_ms: float
    lookup_timeout_ms: float
    max_attempts: int | None = None   # None: 4 * digits + 16, as Ring.route_bound
    table_repair: bool = True   # refill a routing-table entry a lookup found dead (else it stays empty)

    def __post_init__(self) -> None:
        """Refuse timings that are not positive (proc_ms may be 0)."""
        for name in ("keepalive_ms", "failure_timeout_ms", "rto_ms", "lookup_timeout_ms"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        if not self.proc_ms >= 0:
            raise ValueError("proc_ms must be non-negative")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")


@dataclass
class TimedResult:
    """What a run logged: lookups, detections, repairs started and done, messages by kind, final leaf sets."""

    lookups: list[dict]
    detections: list[tuple[int, int, float | None, float]]   # (failed, detector, t_crash, t_detected)
    repairs: list[tuple[int, float]]                           # (node, t_repaired)
    repair_starts: list[tuple[int, int, int, float]]          # (node, failed, asked, t_started)
    messages: Counter
    leaf: list[list[int]] = field(default_factory=list)        # every node's leaf set at the end
    sent_at: dict[str, list[float]] = field(default_factory=dict)   # send times by kind (not lookups)
    table_asks: list[tuple[int, int, int, float]] = field(default_factory=list)     # (node, slot, asked, t)
    table_repairs: list[tuple[int, int, int, float]] = field(default_factory=list)  # (node, slot, entry, t)
    joined: list[tuple[int, float]] = field(default_factory=list)   # (newcomer, t its state was built)
    joins_lost: list[tuple[int, float]] = field(default_factory=list)   # (newcomer, t it tried again)
    join_timeouts: list[tuple[int, int, int, float]] = field(default_factory=list)   # (newcomer, at, dead, t)
    paths: dict[int, list[tuple[int, float]]] = field(default_factory=dict)   # SUBSCRIBE -> hops (node, t)


@dataclass
class _Node:
    """One node's Pastry state: leaf-set sides (nearest first), routing table, neighbourhood, known dead."""

    pred: list[int]
    succ: list[int]
    rt: list[int]
    nbr: list[int]
    known_dead: set[int]
    asked: dict[int, set[int]] = field(default_factory=dict)  # slot -> the nodes asked in its repair
    asking: dict[int, int] = field(default_factory=dict)      # slot -> the node whose answer it waits for
    told: set[int] | None = None   # after a recovery: the nodes told it is back (asked or announced to)
    heard: dict[int, float] = field(default_factory=dict)   # node -> when it last said it is back

    @property
    def leaf(self) -> list[int]:
        """The leaf set in the kernels' layout: predecessors then successors, each nearest first."""
        return self.pred + self.succ


def _ragged(values: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """One node's list as the (values, offsets) pair `route_step` reads."""
    return np.asarray(values, dtype=np.int64), np.array([0, len(values)], dtype=np.int64)


class TimedPastry(Joins):
    """The event-driven simulator: one converged ring, then `run` with crashes, returns, joins and lookups."""

    def __init__(self, ring: Ring, link_ms: Callable[[int, int], float], params: TimedParams,
                 phase: np.ndarray, absent: np.ndarray | None = None) -> None:
        if ring.n <= ring.leaf_set:
            raise ValueError(f"the ring needs more than L = {ring.leaf_set} nodes, has {ring.n}")
        phase = np.asarray(phase, dtype=np.float64)
        if phase.shape != (ring.n,) or (phase < 0).any() or (phase >= params.keepalive_ms).any():
            raise ValueError("phase needs one value in [0, keepalive_ms) per node")
        self.ring, self.link, self.params, self.phase = ring, link_ms, params, phase
        self.max_attempts = ring.route_bound if params.max_attempts is None else params.max_attempts
        self.absent = np.unique(np.asarray([] if absent is None else absent, dtype=np.int64))
        present = ring.n - len(self.absent)
        if present <= ring.leaf_set:
            raise ValueError(f"more than L = {ring.leaf_set} nodes must be present, not {present}")
        self._converged = self._converged_state()
        self.nodes = self._fresh_nodes()

    def _converged_state(self) -> list[tuple[list[int], list[int], list[int], list[int]]]:
        """Every node's converged (pred, succ, rt, nbr), from the kernels: the absent nodes' with every node
        in, the others' on the overlay of those others alone."""
        ring, half, states = self.ring, self.ring.leaf_set // 2, [None] * self.ring.n
        members = np.setdiff1d(np.arange(ring.n), self.absent)
        on_whole = self.absent if len(self.absent) else members   # those whose state is the whole ring's
        parts = [(on_whole, (kernels.leaf_sets(ring, on_whole), kernels.routing_tables(ring, on_whole),
                             kernels.neighborhood_sets(ring, on_whole)))]
        if len(self.absent):
            sub = kernels.members_ring(ring, members)
            parts.append((members, kernels.member_states(sub, members, members)))
        for nodes, (leaf, rt, nbr) in parts:
            for x, row, t, m in zip(nodes.tolist(), leaf, rt, nbr):
                states[x] = (row[:half].tolist(), row[half:].tolist(), t.tolist(), m.tolist())
        return states

    def _fresh_nodes(self) -> list[_Node]:
        """Copies of the converged state, one per node, nobody known dead."""
        return [_Node(list(p), list(s), list(t), list(m), set()) for p, s, t, m in self._converged]

    def leaf_sets(self) -> list[list[int]]:
        """Every node's current leaf set (after a run: at its end), in the kernels' layout."""
        return [node.leaf for node in self.nodes]

    def sides(self, x: int) -> tuple[list[int], list[int]]:
        """Copies of node x's current leaf-set sides: (predecessors, successors), each nearest first."""
        return list(self.nodes[x].pred), list(self.nodes[x].succ)

    def node_state(self, x: int) -> tuple[list[int], list[int], list[int], set[int]]:
        """Copies of node x's current (leaf set, routing table, neighbourhood set, known dead)."""
        node = self.nodes[x]
        return node.leaf, list(node.rt), list(node.nbr), set(node.known_dead)

    # ------------------------------------------------------------ the event loop

    def run(self, crashes: dict[int, Times], lookups: list[Lookup], until_ms: float,
            leaves: dict[int, Times] | None = None, recoveries: dict[int, Times] | None = None,
            newcomers: set[int] | frozenset[int] = frozenset(), subscribes: int | None = None,
            holds: Callable[[int, int, float, int], bool] | None = None) -> TimedResult:
        """Simulate from the converged state to `until_ms` (reset first: runs are independent);
        `crashes`, graceful `leaves` and `recoveries` are {node: time or list of times}: a node goes down
        (crash or leave) and recovers in turn, each time after the one before. The first return of a
        node of `newcomers` (each absent from the start) is a join (`timed_joins`). The lookups from id
        `subscribes` on are SUBSCRIBEs: their hops are logged, and one stops (outcome "grafted") at the first
        node after its source where `holds(lid, node, t, hop)` says that node holds its topic when its hop
        `hop` arrives there."""
        self.subscribes, self.holds = subscribes, holds
        spans = outages(crashes, leaves, recoveries)
        gone = {v for v, down, *_ in spans if down == -math.inf}
        if gone != set(self.absent.tolist()):
            raise ValueError("exactly the absent nodes go down at -inf (before time starts)")
        if not set(newcomers) <= gone:
            raise ValueError("a newcomer must be absent from the start")
        if any(down == -math.inf and graceful for _v, down, _up, graceful in spans):
            raise ValueError("a node absent from the start is down, not leaving")
        self._reset({v for v, *_ in spans}, lookups, until_ms)
        for v, down, up, graceful in spans:   # every going before every return: ties keep that order
            self.spans[v].append((down, up))
            self._push(down, CRASH, self._leave if graceful else self._crash, v)
        for v, down, up, _g in spans:
            if up < math.inf:
                joins = down == -math.inf and v in newcomers
                self._push(up, CRASH, self._join if joins else self._recover, v)
        for x in range(self.ring.n):
            self._schedule_tick(x, 0)
        for lid, (t, *_rest) in enumerate(lookups):
            self._push(float(t), TIMER, self._issue, lid)
        while self.heap and self.heap[0][0] < until_ms:
            t, _prio, _seq, handler, args = heapq.heappop(self.heap)
            handler(t, *args)
        return TimedResult(self.lookups, self.detections, self.repairs, self.repair_starts, self.messages,
                           self.leaf_sets(), dict(self.sent_at), self.table_asks, self.table_repairs,
                           self.join_built, self.join_lost, self.join_timeouts, self.paths)

    def _reset(self, downs: set[int], lookups: list[Lookup], until_ms: float) -> None:
        """Fresh state, logs and counters for a run; checks its inputs."""
        n = self.ring.n
        if any(not 0 <= v < n for v in downs) or any(not 0 <= lk[1] < n for lk in lookups):
            raise ValueError("crashes and lookup sources must be nodes 0..N-1")
        self.nodes = self._fresh_nodes()
        self.until = float(until_ms)
        self.alive = np.ones(n, dtype=bool)
        self.inc = np.zeros(n, dtype=np.int64)   # each node's incarnation: a recovery starts a new one
        self.spans: defaultdict[int, list[tuple[float, float]]] = defaultdict(list)   # (down, up) in turn
        self.heap: list = []
        self.seq = 0
        self.next_id = 0                    # probe and leaf-request ids
        self.pending: set[int] = set()      # probes and leaf requests sent, no reply yet, timer not run
        self.messages: Counter = Counter()
        self.sent_at: defaultdict[str, list[float]] = defaultdict(list)
        self.detections, self.repairs, self.repair_starts = [], [], []
        self.table_asks, self.table_repairs = [], []
        self.join_log: list[tuple[int, float]] = []           # (newcomer, t it joined)
        self.join_built: list[tuple[int, float]] = []         # (newcomer, t its state was built)
        self.join_lost: list[tuple[int, float]] = []          # (newcomer, t it tried again)
        self.join_timeouts: list[tuple[int, int, int, float]] = []   # (newcomer, forwarder, dead, t)
        self.join_replies: dict[int, dict] = {}               # newcomer -> hop -> (node, last, state)
        self.join_tries: dict[int, int] = {}                  # newcomer -> its latest try
        self.join_life: dict[int, int] = {}                   # newcomer -> the incarnation it joined in
        self.paths: dict[int, list[tuple[int, float]]] = {}   # SUBSCRIBE -> its hops (node, arrival)
        self.keys: list[tuple[np.ndarray, np.ndarray]] = []
        self.lookups: list[dict] = []
        for t, s, k_hi, k_lo in lookups:
            self._add_lookup(t, s, k_hi, k_lo)

    def _add_lookup(self, t: float, src: int, k_hi: int, k_lo: int) -> int:
        """Log a lookup of the key (its uint64 halves) from src at t, not issued yet; return its id."""
        self.keys.append((np.array([k_hi], dtype=np.uint64), np.array([k_lo], dtype=np.uint64)))
        self.lookups.append(dict(id=len(self.lookups), t_issue=float(t), src=int(src), outcome="unfinished",
                                 dest=-1, t_done=None, hops=0, timeouts=0, latency_ms=None))
        return len(self.lookups) - 1

    def _push(self, t: float, priority: int, handler: Callable, *args) -> None:
        """Schedule handler(t, *args)."""
        heapq.heappush(self.heap, (t, priority, self.seq, handler, args))
        self.seq += 1

    def _at_arrival(self, t: float, handler: Callable, *args) -> None:
        """Schedule a message's arrival (sent and counted by the caller)."""
        self._push(t, MESSAGE, handler, *args)

    def _at_timer(self, t: float, handler: Callable, *args) -> None:
        """Schedule a timer."""
        self._push(t, TIMER, handler, *args)

    def _send(self, kind: str, u: int, v: int, t: float, handler: Callable, *args) -> None:
        """Send a message of `kind` from u to v at t (counted now): handler runs at the arrival."""
        self.messages[kind] += 1
        self.sent_at[kind].append(t)
        self._push(self._arrival(u, v, t), MESSAGE, handler, *args)

    def _arrival(self, u: int, v: int, t: float) -> float:
        """When a message sent from u to v at t arrives."""
        return t + float(self.link(u, v)) + self.params.proc_ms

    def _new_id(self) -> int:
        """A fresh id for a probe or a leaf request."""
        self.next_id += 1
        return self.next_id

    def _crash(self, t: float, v: int) -> None:
        """Node v stops."""
        self.alive[v] = False

    def _down_at(self, v: int, t: float) -> bool:
        """Whether v is down at t: crashed or left at or before t, and not recovered since."""
        return any(down <= t < up for down, up in self.spans.get(v, ()))

    def _went_at(self, v: int, t: float) -> float | None:
        """When v last crashed or left at or before t (None: never)."""
        return max((down for down, _ in self.spans.get(v, ()) if down <= t), default=None)

    def _heard(self, x: int, y: int, since: float) -> bool:
        """Whether x heard y say it is back at or after `since` (when a request to y was sent)."""
        return self.nodes[x].heard.get(y, -np.inf) >= since

    def _live(self, x: int, inc: int) -> bool:
        """Whether x is alive in the incarnation `inc` (a timer or reply of an earlier one does nothing)."""
        return bool(self.alive[x]) and int(self.inc[x]) == inc

    # ------------------------------------------------------------ recovery

    def _recover(self, t: float, x: int) -> None:
        """x comes back with the tables it had when it went down, knowing no node dead: it ticks again and
        asks every member of its last known leaf set for its leaf set; each live one that gets the request
        knows x alive."""
        if x in self.join_replies:   # a newcomer that went down before its state was built joins again
            self._join(t, x)
            return
        self.alive[x] = True
        self.inc[x] += 1
        node = self.nodes[x]
        node.asked.clear()
        node.asking.clear()
        node.known_dead.clear()   # stale: who died or came back while it was away, it cannot know
        node.told = set(node.leaf)
        k = max(0, math.ceil((t - float(self.phase[x])) / self.params.keepalive_ms))
        self._schedule_tick(x, k)
        for m in node.leaf:
            self._request_leaf(x, m, t, rejoin=True)

    def _on_rejoin(self, t: float, x: int, m: int, rid: int, inc: int) -> None:
        """A live m learns x is back, takes it into its leaf set if it is among the nearest (a newcomer
        also into its routing table: `take_in`), and replies with its leaf set."""
        if self.alive[m]:
            self._welcome(m, x, t)
            if self.is_new(x):
                self.take_in(m, x)
            self._send("rejoin_reply", m, x, t, self._on_rejoin_reply, x, m, rid, self.nodes[m].leaf, inc)

    def _on_rejoin_reply(self, t: float, x: int, m: int, rid: int, members: list[int], inc: int) -> None:
        """A live x merges m's leaf set into its own, as a leaf-set reply but logged as no repair."""
        if self._live(x, inc):
            self.pending.discard(rid)
            self._merge(t, x, m, members)

    def _welcome(self, m: int, x: int, t: float) -> None:
        """m hears from x that it is back: x is no longer dead to m (nor declared failed for a request
        sent before), and joins m's leaf set if among the L/2 nearest."""
        node = self.hear(m, x, t)
        node.pred, node.succ = self.nearest_sides(m, (set(node.leaf) | {x}) - {m} - node.known_dead)

    def hear(self, m: int, x: int, t: float) -> _Node:
        """m hears from x at t that it is alive: x is no longer dead to m, and heard from now; m's node."""
        node = self.nodes[m]
        node.known_dead.discard(x)
        node.heard[x] = t
        return node

    def _announce(self, t: float, x: int) -> None:
        """A recovered x tells the members of its leaf set it has not told yet that it is back."""
        node = self.nodes[x]
        for c in node.leaf:
            if c not in node.told:
                node.told.add(c)
                self._send("announce", x, c, t, self._on_announce, c, x)

    def _on_announce(self, t: float, c: int, x: int) -> None:
        """A live c learns x is back."""
        if self.alive[c]:
            self._welcome(c, x, t)

    def _leave(self, t: float, v: int) -> None:
        """Node v tells its leaf set that it leaves, then stops."""
        for m in self.nodes[v].leaf:
            self._send("leave", v, m, t, self._on_leave, m, v)
        self.alive[v] = False

    def _on_leave(self, t: float, x: int, v: int) -> None:
        """A live x learns that v left: v is failed to it."""
        if self.alive[x]:
            self.declare_failed(x, v, t)

    # ------------------------------------------------------------ keep-alives and failure detection

    def _schedule_tick(self, x: int, k: int) -> None:
        """Schedule x's k-th tick, phase + k T_ka, if it falls before the end."""
        t = float(self.phase[x]) + k * self.params.keepalive_ms
        if t < self.until:
            self._push(t, TIMER, self._tick, x, k, int(self.inc[x]))

    def _tick(self, t: float, x: int, k: int, inc: int) -> None:
        """A live x probes every member of its leaf set, each probe with its own timer."""
        if not self._live(x, inc):
            return   # a dead node ticks no more (a recovered one ticks anew)
        for y in self.nodes[x].leaf:
            pid = self._new_id()
            self.pending.add(pid)
            self._send("probe", x, y, t, self._on_probe, x, y, pid)
            self._push(t + self.params.failure_timeout_ms, TIMER, self._probe_timeout, x, y, pid, inc)
        self._schedule_tick(x, k + 1)

    def _on_probe(self, t: float, x: int, y: int, pid: int) -> None:
        """A live y answers x's probe at once."""
        if self.alive[y]:
            self._send("probe_reply", y, x, t, self._on_reply, x, pid)

    def _on_reply(self, t: float, x: int, rid: int) -> None:
        """A live x notes the reply to its probe or leaf request `rid`."""
        if self.alive[x]:
            self.pending.discard(rid)

    def _probe_timeout(self, t: float, x: int, y: int, pid: int, inc: int) -> None:
        """No reply to probe `pid` yet: y is failed if still in x's leaf set."""
        answered = pid not in self.pending
        self.pending.discard(pid)
        if self._live(x, inc) and not answered and y in self.nodes[x].leaf and \
                not self._heard(x, y, t - self.params.failure_timeout_ms):
            self.declare_failed(x, y, t)

    def declare_failed(self, x: int, y: int, t: float, by_lookup: bool = False) -> None:
        """x learns at t that y failed: forgets it and, if y was a leaf-set member, starts a repair; if a
        lookup found y dead, also the repair of the routing-table entry that named y."""
        node = self.nodes[x]
        if y in node.known_dead:
            return   # a second timeout on y (e.g. two lookups sent there at once) teaches x nothing
        node.known_dead.add(y)
        side = node.pred if y in node.pred else node.succ if y in node.succ else None
        if side is not None:
            side.remove(y)
        slots = [s for s, e in enumerate(node.rt) if e == y]
        node.rt = [-1 if e == y else e for e in node.rt]
        node.nbr = [m for m in node.nbr if m != y]
        self.detections.append((y, x, self._went_at(y, t), t))
        if side is not None:
            self._start_repair(x, y, side is node.pred, t)
        for s in slots if by_lookup else ():
            node.asked[s] = set()
            self._ask_table(x, s, t)

    # ------------------------------------------------------------ leaf-set repair

    def _start_repair(self, x: int, y: int, on_pred: bool, t: float) -> None:
        """x asks the farthest member of y's side (else of the other side) for its leaf set."""
        node = self.nodes[x]
        same, other = (node.pred, node.succ) if on_pred else (node.succ, node.pred)
        if not same and not other:
            return
        z = same[-1] if same else other[-1]   # sides are nearest first
        self.repair_starts.append((x, y, z, t))
        self._request_leaf(x, z, t)

    def _request_leaf(self, x: int, z: int, t: float, rejoin: bool = False) -> None:
        """x asks z for its leaf set (as a REJOIN after a recovery), with a timer T_fd later."""
        rid = self._new_id()
        self.pending.add(rid)
        inc = int(self.inc[x])
        if rejoin:
            self._send("rejoin", x, z, t, self._on_rejoin, x, z, rid, inc)
        else:
            self._send("leaf_request", x, z, t, self._on_leaf_request, x, z, rid, inc)
        self._push(t + self.params.failure_timeout_ms, TIMER, self._leaf_timeout, x, z, rid, inc)

    def _on_leaf_request(self, t: float, x: int, z: int, rid: int, inc: int) -> None:
        """A live z answers at once with a copy of its leaf set."""
        if self.alive[z]:
            self._send("leaf_reply", z, x, t, self._on_leaf_reply, x, z, rid, self.nodes[z].leaf, inc)

    def _on_leaf_reply(self, t: float, x: int, z: int, rid: int, members: list[int], inc: int) -> None:
        """A live x merges z's leaf set into its own: a repair."""
        if self._live(x, inc):
            self.pending.discard(rid)
            self._merge(t, x, z, members)
            self.repairs.append((x, t))

    def _merge(self, t: float, x: int, z: int, members: list[int]) -> None:
        """x keeps the nearest of its leaf set, z's and z (a recovered x then tells the new members)."""
        node = self.nodes[x]
        cands = (set(node.leaf) | set(members) | {z}) - {x} - node.known_dead
        node.pred, node.succ = self.nearest_sides(x, cands)
        if node.told is not None:
            self._announce(t, x)

    def nearest_sides(self, x: int, cands: set[int]) -> tuple[list[int], list[int]]:
        """(predecessors, successors) of x among cands: each candidate on the side it is nearer on
        (clockwise on a tie), then the L/2 nearest of each side, nearest first."""
        n, px, half = self.ring.n, int(self.ring.pos[x]), self.ring.leaf_set // 2
        pos = self.ring.pos
        cw = {c: (int(pos[c]) - px) % n for c in cands}
        succ = sorted((c for c in cands if cw[c] <= n - cw[c]), key=cw.get)[:half]
        pred = sorted((c for c in cands if cw[c] > n - cw[c]), key=lambda c: n - cw[c])[:half]
        return pred, succ

    def _leaf_timeout(self, t: float, x: int, z: int, rid: int, inc: int) -> None:
        """No leaf reply from z yet: z is failed, unless it said it is back since: then x asks it again."""
        answered = rid not in self.pending
        self.pending.discard(rid)
        if self._live(x, inc) and not answered:
            if self._heard(x, z, t - self.params.failure_timeout_ms):
                self._request_leaf(x, z, t)
            else:
                self.declare_failed(x, z, t)

    # ------------------------------------------------------------ routing-table repair

    def _ask_table(self, x: int, s: int, t: float) -> None:
        """x asks the next node for its entry at slot s (nearest unasked entry of row r, then r + 1, ...)."""
        node = self.nodes[x]
        w = self._table_candidate(x, s)
        if w is None:
            node.asked.pop(s, None)
            return
        node.asked[s].add(w)
        node.asking[s] = w
        rid = self._new_id()
        self.pending.add(rid)
        self.table_asks.append((x, s, w, t))
        inc = int(self.inc[x])
        self._send("table_request", x, w, t, self._on_table_request, x, w, s, rid, inc)
        self._push(t + self.params.failure_timeout_ms, TIMER, self._table_timeout, x, w, s, rid, inc)

    def _table_candidate(self, x: int, s: int) -> int | None:
        """The nearest non-empty entry not yet asked for slot s, in s's row or the first row after it
        that has one; None if there is none."""
        node, cols = self.nodes[x], 1 << self.ring.b
        for r in range(s // cols, len(node.rt) // cols):
            row = [e for e in node.rt[r * cols:(r + 1) * cols] if e >= 0 and e not in node.asked[s]]
            if row:
                return min(row, key=lambda e: (float(self.link(x, e)), e))
        return None

    def _on_table_request(self, t: float, x: int, w: int, s: int, rid: int, inc: int) -> None:
        """A live w answers at once with its entry at slot s (-1 if empty)."""
        if self.alive[w]:
            rt = self.nodes[w].rt
            entry = rt[s] if s < len(rt) else -1
            self._send("table_reply", w, x, t, self._on_table_reply, x, w, s, rid, entry, inc)

    def _on_table_reply(self, t: float, x: int, w: int, s: int, rid: int, entry: int, inc: int) -> None:
        """A live x takes the entry if it names a node it may use while its own is empty; else asks on."""
        if not self._live(x, inc) or rid not in self.pending:
            return   # a reply after its timer: the repair went on without it
        self.pending.discard(rid)
        node = self.nodes[x]
        if node.asking.get(s) != w:
            return   # a repair of the slot begun since asks someone else, or the slot was repaired
        del node.asking[s]
        if entry >= 0 and entry != x and entry not in node.known_dead and node.rt[s] == -1:
            node.rt[s] = entry
            node.asked.pop(s, None)
            self.table_repairs.append((x, s, entry, t))
        else:
            self._ask_table(x, s, t)

    def _table_timeout(self, t: float, x: int, w: int, s: int, rid: int, inc: int) -> None:
        """No table reply from w yet: w is failed, and x asks the next node."""
        answered = rid not in self.pending
        self.pending.discard(rid)
        if self._live(x, inc) and not answered and self.nodes[x].asking.get(s) == w:
            del self.nodes[x].asking[s]
            if not self._heard(x, w, t - self.params.failure_timeout_ms):
                self.declare_failed(x, w, t)
            self._ask_table(x, s, t)

    # ------------------------------------------------------------ lookups

    def _issue(self, t: float, lid: int) -> None:
        """The lookup starts at its source, if that is alive."""
        look = self.lookups[lid]
        if not self.alive[look["src"]]:
            look["outcome"] = "not_issued"
            return
        self._hop(lid, look["src"], t)
        self._step(t, lid, look["src"])

    def _hop(self, lid: int, v: int, t: float) -> None:
        """Log a SUBSCRIBE's arrival at v (or its issue there)."""
        if self.subscribes is not None and lid >= self.subscribes:
            self.paths.setdefault(lid, []).append((v, t))

    def _step(self, t: float, lid: int, u: int) -> None:
        """The lookup is at live u at t: lost past its limits, else delivered or sent on by the rule."""
        if self._over(lid, t):
            self._finish(lid, "lost", -1, t)
            return
        v = self._next_hop(lid, u)
        if v is None:
            khi, klo = self.keys[lid]
            right = int(closest_live(self.ring, self.alive, khi, klo)[0]) == u
            self._finish(lid, "correct" if right else "wrong", u, t)
            return
        self.messages["lookup"] += 1
        arrive = self._arrival(u, v, t)
        if self._down_at(v, arrive):   # dead on arrival: only a timeout tells u
            self._push(t + self.params.rto_ms, TIMER, self._lookup_timeout, lid, u, v, int(self.inc[u]))
        else:
            self._push(arrive, MESSAGE, self._on_lookup, lid, v)

    def _over(self, lid: int, t: float) -> bool:
        """Whether the lookup is past its limits at t: too late, or too many hops and timeouts."""
        look = self.lookups[lid]
        return t > look["t_issue"] + self.params.lookup_timeout_ms or \
            look["hops"] + look["timeouts"] >= self.max_attempts

    def _next_hop(self, lid: int, u: int) -> int | None:
        """The routing rule on u's current state: the next node, or None where the lookup ends at u."""
        khi, klo = self.keys[lid]
        return self._rule(u, int(khi[0]), int(klo[0]))

    def _rule(self, u: int, khi: int, klo: int) -> int | None:
        """The routing rule for a key on u's current state: the next node, or None where it ends at u."""
        node = self.nodes[u]
        key = np.array([khi], dtype=np.uint64), np.array([klo], dtype=np.uint64)
        nxt, rule = kernels.route_step(self.ring, *key, np.array([u]), *_ragged(self._routing_leaf(u)),
                                       *_ragged(node.rt), *_ragged(node.nbr))
        return None if rule[0] == kernels.DELIVERED else int(nxt[0])

    def _routing_leaf(self, u: int) -> list[int]:
        """u's leaf set as the routing rule reads it: a side short of L/2 (a member declared failed,
        not yet replaced) is padded with its farthest member, or u itself when empty, so the rule's
        range test keeps that side's bound instead of reading a short list as a whole small ring."""
        node, half = self.nodes[u], self.ring.leaf_set // 2
        pred = node.pred + [node.pred[-1] if node.pred else u] * (half - len(node.pred))
        succ = node.succ + [node.succ[-1] if node.succ else u] * (half - len(node.succ))
        return pred + succ

    def _on_lookup(self, t: float, lid: int, v: int) -> None:
        """The lookup arrives at v: one hop more."""
        if not self.alive[v]:
            return   # never happens: a send to a node dead on arrival takes the timeout path
        look = self.lookups[lid]
        look["hops"] += 1
        if self.holds is not None and lid >= self.subscribes and self.holds(lid, v, t, look["hops"]):
            self._hop(lid, v, t)
            self._finish(lid, "grafted", v, t)   # Scribe's forward upcall: the SUBSCRIBE stops at the tree
            return
        if not self._over(lid, t):   # an arrival past the limits is lost there, before Scribe sees it
            self._hop(lid, v, t)
        self._step(t, lid, v)

    def _lookup_timeout(self, t: float, lid: int, u: int, v: int, inc: int) -> None:
        """u learns v is dead: declares it failed (unless v said it is back since the send) and routes the
        lookup again (lost if u died meanwhile, even if it is back by then)."""
        if not self._live(u, inc):
            self._finish(lid, "lost", -1, t)
            return
        if not self._heard(u, v, t - self.params.rto_ms):
            self.declare_failed(u, v, t, by_lookup=self.params.table_repair)
        self.lookups[lid]["timeouts"] += 1
        self._step(t, lid, u)

    def _finish(self, lid: int, outcome: str, dest: int, t: float) -> None:
        """Log the lookup's end."""
        look = self.lookups[lid]
        look.update(outcome=outcome, dest=dest, t_done=t, latency_ms=t - look["t_issue"])
