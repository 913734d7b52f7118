"""A plain sequential Scribe on trees that SUBSCRIBEs change, in simulated time, to check `scribe.timed`.

One heap of timed happenings, processed one at a time in order of (time, priority, sequence): priority 1
is a message arriving (a SUBSCRIBE's hop, an event's copy, a heartbeat, an acknowledgement), 2 a timer (a
parent's heartbeat tick, a child's heartbeat timeout). The start trees are a `SequentialScribe`'s, built
from every subscription on the nodes' states at the start. Nothing at or after the end of the run is
processed.

- **Holdings.** A node of a start tree holds the topic from the start until it first goes down (`gone`);
  a node can also start holding it afresh at a SUBSCRIBE's hop, until it next goes down. Going down loses
  everything: a fresh holding starts with no children, and edges taken before are never used again.
- **SUBSCRIBEs.** Given as paths of timed hops. A hop at a node that is down ends it; the subscriber (hop
  0) starts holding if it does not. A later hop's node takes the previous hop as a child unless that node
  is its ancestor then (a loop; checked whether it held the topic or not), a parent that has that child
  already ending the old edge then; if it held the topic the SUBSCRIBE stops there, else it starts
  holding and lets it go on. Where Pastry delivered the SUBSCRIBE (at its last hop's node, on its arrival
  or, after timeouts there, later), that node is a root from that delivery, for that holding.
- **Events.** Each event starts where and when the timed Pastry reference delivered its route to the
  topicId, if that node is a root holding the topic then. A node holding a copy at t sends one to each
  child it has at t, arriving at t + link(u, c) + proc, unless the application's forward upcall, asked
  with (event, topic, node, t), says no.
- **Heartbeats.** A parent ticks at phase + k T_hb (k = 0, 1, ...). At a tick it sends a heartbeat on
  each of its edges in force it has not sent an event's copy on since its tick before (after it; before
  the first tick, since the start), a copy sent at the tick's very time counting (it is processed first).
- **Heartbeat timeouts.** A child expects to hear from its parent on each edge (a heartbeat, a copy or the
  acknowledgement of the SUBSCRIBE) within T_hbf of the last time it did, a start tree's edge counting as
  heard at 0; a timeout with nothing heard declares the parent dead (the fault upcall), once per edge,
  if the child is still in the holding it took the edge in. Nothing else follows: SUBSCRIBEs are given.
"""
from __future__ import annotations

import heapq
import math
from bisect import insort
from dataclasses import dataclass, field
from typing import Callable, Sequence

from scribe_spark.reference.sequential_scribe import SequentialScribe

MESSAGE, TIMER = 1, 2
Copy = tuple[int, int, float]           # (event, node, arrival time)
Edge = tuple[int, int, int, float]      # (topic, parent, child, when taken): a pair may be taken again
Span = tuple[float, float]              # [start, end)
Hops = list[tuple[int, float]]          # a SUBSCRIBE's (node, time) hops, the subscriber first
Subscribe = tuple[int, int, Hops, float | None]   # (path id, topic, hops, when Pastry delivered it, or None)


def first_goings(spans: list[tuple[int, float, float, bool]]) -> dict[int, float]:
    """{node: when it first went down within the run} of the (node, down, up, graceful) outages."""
    gone: dict[int, float] = {}
    for v, down, _up, _graceful in spans:
        if down > -math.inf:
            gone[v] = min(gone.get(v, math.inf), down)
    return gone


@dataclass
class Result:
    """What the run gives: the copies delivered, the heartbeats' sending times, the parents declared dead."""

    copies: list[Copy] = field(default_factory=list)
    heartbeats: list[float] = field(default_factory=list)
    detections: list[tuple[int, int, int, float]] = field(default_factory=list)   # (topic, parent, child, t)


class TimedEvents:
    """Scribe's SUBSCRIBEs, events, heartbeats and heartbeat timeouts, one happening at a time."""

    def __init__(self, scribe: SequentialScribe, link: Callable[[int, int], float], proc: float,
                 gone: dict[int, float], until: float, heartbeat_ms: float = math.inf,
                 timeout_ms: float = math.inf, phase: Callable[[int], float] = lambda _v: 0.0,
                 forward: Callable[[int, int, int, float], bool] | None = None,
                 spans: list[tuple[int, float, float]] | None = None) -> None:
        self.scribe, self.link, self.proc, self.gone, self.until = scribe, link, proc, gone, until
        self.period, self.timeout, self.phase, self.forward = heartbeat_ms, timeout_ms, phase, forward
        self.heap: list = []
        self.seq = 0
        self.sent: dict[Edge, float] = {}      # the last copy each parent sent on each edge
        self.heard: dict[Edge, float] = {}     # the last time each child heard from its parent on each edge
        self.out = Result()
        if spans is None:                      # without spans, the first going down is the only one
            spans = [(v, down, math.inf) for v, down in gone.items()]
        self.outages: dict[int, list[Span]] = {}
        for v, down, up in spans:
            self.outages.setdefault(v, []).append((down, up))
        self.holdings: dict[tuple[int, int], list[Span]] = {}   # (topic, node) -> its holdings, in order
        self.makers: dict[tuple[int, int, float], tuple[int, int]] = {}   # (topic, node, start) -> (k, hop)
        self.rooted: dict[tuple[int, int], list[Span]] = {}     # (topic, node) -> when it is a root
        self.info: dict[Edge, tuple[float, Span | None]] = {}   # edge -> (parent's holding's end, child's)
        self.kids: dict[tuple[int, int], list[Edge]] = {}       # (topic, parent) -> its edges, sorted
        self.ups: dict[tuple[int, int], list[Edge]] = {}        # (topic, child) -> its edges to parents
        self.edges: dict[int, list[Edge]] = {}                  # parent -> its edges, sorted
        self.going: list[bool] = []                             # whether each SUBSCRIBE still goes on

    def run(self, starts: list[tuple[int, int, int, float]], subscribes: Sequence[Subscribe] = ()) -> Result:
        """Process everything before the end; `starts` has (event, topic, node, t): where and when each
        event's route ended; `subscribes` has (path id, topic, hops, delivered) SUBSCRIBEs."""
        self._start_trees()
        # Every hop is scheduled first, so at a tie a hop's change is in force for the rest of that time.
        for k, (_path, topic, hops, done) in enumerate(subscribes):
            self.going.append(True)
            for i, (_v, t) in enumerate(hops):
                self._push(t, MESSAGE, self._hop, k, topic, hops, i, done)
        for event, topic, node, t in starts:
            self._push(t, MESSAGE, self._start, event, topic, node)
        if self.period < math.inf:
            tickers = {e[1] for e in self.info} | {v for _k, _tp, hops, _e in subscribes for v, _t in hops}
            for p in sorted(tickers):
                self._push(self.phase(p), TIMER, self._tick, p, 0)
        for edge in sorted(self.info) if self.timeout < math.inf else ():
            self.heard[edge] = 0.0
            self._push(self.timeout, TIMER, self._timeout, edge, 0.0)
        while self.heap and self.heap[0][0] < self.until:
            t, _prio, _seq, handler, args = heapq.heappop(self.heap)
            handler(t, *args)
        return self.out

    def _push(self, t: float, prio: int, handler: Callable, *args) -> None:
        """Schedule handler(t, *args)."""
        heapq.heappush(self.heap, (t, prio, self.seq, handler, args))
        self.seq += 1

    def _start_trees(self) -> None:
        """Start trees: their nodes hold until they first go down, their edges are in force from the start."""
        nodes = set(self.scribe.roots.items())
        for (topic, p), kids in self.scribe.children.items():
            nodes |= {(topic, p)} | {(topic, c) for c in kids}
        for topic, v in nodes:
            self.holdings[(topic, v)] = [(-math.inf, self.gone.get(v, math.inf))]
        for topic, r in self.scribe.roots.items():
            self.rooted[(topic, r)] = list(self.holdings[(topic, r)])
        for (topic, p), kids in self.scribe.children.items():
            for c in kids:
                self._add((topic, p, c, -math.inf), self.holdings[(topic, p)][0][1],
                          self.holdings[(topic, c)][0])

    def _add(self, edge: Edge, parent_end: float, child: Span | None) -> None:
        """Record an edge, taken in a parent's holding ending at parent_end and in the child's `child`."""
        topic, p, c, _taken = edge
        self.info[edge] = (parent_end, child)
        insort(self.kids.setdefault((topic, p), []), edge)
        insort(self.ups.setdefault((topic, c), []), edge)
        insort(self.edges.setdefault(p, []), edge)

    def made_holdings(self) -> dict[tuple[int, int], list[tuple[float, float, int, int]]]:
        """Every holding with the SUBSCRIBE hop that made it: {(topic, node): [(start, end, k, hop)]}, (-1,
        -1) for those of the start trees."""
        return {(topic, v): [(a, b, *self.makers.get((topic, v, a), (-1, -1))) for a, b in spans]
                for (topic, v), spans in self.holdings.items()}

    def _down(self, v: int, t: float) -> bool:
        """Whether v is down at t."""
        return any(down <= t < up for down, up in self.outages.get(v, ()))

    def _next_down(self, v: int, t: float) -> float:
        """When v next goes down strictly after t."""
        return min((down for down, _up in self.outages.get(v, ()) if down > t), default=math.inf)

    def _gone_for_good(self, v: int, t: float) -> bool:
        """Whether v went down at or before t for good."""
        return any(down <= t and up == math.inf for down, up in self.outages.get(v, ()))

    def _holding(self, topic: int, v: int, t: float) -> Span | None:
        """v's holding of the topic at t, if any."""
        return next((s for s in self.holdings.get((topic, v), ()) if s[0] <= t < s[1]), None)

    def _in_force(self, edge: Edge, t: float) -> bool:
        """Taken at or before t, its parent still in the holding it took the child in."""
        return edge[3] <= t < self.info[edge][0]

    def _still(self, edge: Edge, t: float) -> bool:
        """Whether the edge's child is still at t in the holding it took the edge in."""
        child = self.info[edge][1]
        return child is not None and t < child[1]

    def _ancestor(self, topic: int, u: int, v: int, t: float) -> bool:
        """Whether u is reached from v up the edges in force at t (every parent followed)."""
        seen, todo = {v}, [v]
        while todo:
            x = todo.pop()
            if x == u:
                return True
            for edge in self.ups.get((topic, x), ()):
                if self._in_force(edge, t) and edge[1] not in seen:
                    seen.add(edge[1])
                    todo.append(edge[1])
        return False

    def _hop(self, t: float, k: int, topic: int, hops: Hops, i: int, done: float | None) -> None:
        """The SUBSCRIBE k's i-th hop reaches its node, if the SUBSCRIBE still goes on."""
        v = hops[i][0]
        if not self.going[k] or self._down(v, t):
            self.going[k] = False
            return
        held = self._holding(topic, v, t)
        fresh = held is None
        if held is None:
            held = (t, self._next_down(v, t))
            self.holdings.setdefault((topic, v), []).append(held)
            self.makers[(topic, v, t)] = (k, i)
        if i > 0:
            u = hops[i - 1][0]
            if not self._ancestor(topic, u, v, t):   # a loop is refused, whether v held the topic or not
                self._take(t, topic, v, u, held[1])
            self.going[k] = fresh
        if i == len(hops) - 1 and done is not None:   # a root from Pastry's delivery there
            self.rooted.setdefault((topic, v), []).append((done, held[1]))

    def _take(self, t: float, topic: int, p: int, c: int, parent_end: float) -> None:
        """p takes c as a child at t and acknowledges it: the child's first hearing on the edge. An edge
        p -> c in force at t ends then: p has c once in its children table."""
        for old in self.ups.get((topic, c), ()):
            if old[1] == p and self._in_force(old, t):
                self.info[old] = (t, self.info[old][1])
        edge = (topic, p, c, t)
        child = self._holding(topic, c, t)
        self._add(edge, parent_end, child)
        if self.timeout < math.inf and child is not None:
            self.heard[edge] = t   # expected, but no timer until the acknowledgement arrives
            self._push(t + self.link(p, c) + self.proc, MESSAGE, self._hear, edge)

    def _start(self, t: float, event: int, topic: int, node: int) -> None:
        """An event's route ends at node: it goes down the tree if node is a root then."""
        if any(s <= t < e for s, e in self.rooted.get((topic, node), ())):
            self._copy(t, event, topic, node)

    def _copy(self, t: float, event: int, topic: int, u: int) -> None:
        """A copy reaches u: delivered and sent on to each child it has at t, if u holds the topic."""
        if self._holding(topic, u, t) is None:
            return
        self.out.copies.append((event, u, t))
        if self.forward is not None and not self.forward(event, topic, u, t):
            return
        for edge in self.kids.get((topic, u), ()):
            if self._in_force(edge, t):
                c = edge[2]
                self.sent[edge] = t
                self._push(t + self.link(u, c) + self.proc, MESSAGE, self._copy, event, topic, c)
                self._push(t + self.link(u, c) + self.proc, MESSAGE, self._hear, edge)

    def _tick(self, t: float, p: int, k: int) -> None:
        """Parent p's k-th tick: a heartbeat on each edge in force not sent a copy since the tick before."""
        if self._gone_for_good(p, t):
            return
        before = self.phase(p) + (k - 1) * self.period if k else -math.inf
        for edge in self.edges.get(p, ()):
            if not self._in_force(edge, t) or self.sent.get(edge, -math.inf) > before:
                continue
            self.out.heartbeats.append(t)
            self._push(t + self.link(p, edge[2]) + self.proc, MESSAGE, self._hear, edge)
        self._push(self.phase(p) + (k + 1) * self.period, TIMER, self._tick, p, k + 1)

    def _hear(self, t: float, edge: Edge) -> None:
        """The child hears from its parent on the edge: its heartbeat timeout starts again."""
        if self.timeout == math.inf or not self._still(edge, t) or edge not in self.heard:
            return
        self.heard[edge] = t
        self._push(t + self.timeout, TIMER, self._timeout, edge, t)

    def _timeout(self, t: float, edge: Edge, since: float) -> None:
        """Nothing heard on the edge since `since`: the child declares its parent dead (once)."""
        if self.heard.get(edge) != since or not self._still(edge, t):
            return
        del self.heard[edge]
        self.out.detections.append((*edge[:3], t))


def deliver(scribe: SequentialScribe, starts: list[tuple[int, int, int, float]],
            link: Callable[[int, int], float], proc: float, gone: dict[int, float],
            until: float) -> list[Copy]:
    """Every copy that reached a node still in its tree, in the order processed (no heartbeats)."""
    return TimedEvents(scribe, link, proc, gone, until).run(starts).copies
