"""A plain sequential Scribe on the trees of the start, in simulated time, to check `scribe.timed`.

One heap of timed happenings, processed one at a time in order of (time, priority, sequence): priority 1
is a message arriving (an event's copy, a heartbeat), 2 a timer (a parent's heartbeat tick, a child's
heartbeat timeout). The trees are a `SequentialScribe`'s, built from every subscription on the nodes'
states at the start. A node holds its Scribe state from the start until it first goes down (`gone`); a
message arriving at or after then is dropped, and its timers do nothing from then on. Nothing at or
after the end of the run is processed.

- **Events.** Each event starts where and when the timed Pastry reference delivered its route to the
  topicId; only the topic's root starts it down the tree. A node holding a copy at t sends one to each of
  its children, arriving at t + link(u, c) + proc, unless the application's forward upcall, asked with
  (event, topic, node, t), says no.
- **Heartbeats.** A parent ticks at phase + k T_hb (k = 0, 1, ...). At a tick it sends a heartbeat to
  each child it has not sent an event's copy to since its tick before (after it; before the first tick,
  since the start), a copy sent at the tick's very time counting (it is processed first).
- **Heartbeat timeouts.** A child expects to hear from its parent (a heartbeat or a copy) within T_hbf of
  the last time it did, the start counting as heard at 0; a timeout with nothing heard declares the parent
  dead (the fault upcall), once per tree edge. Nothing else follows: the trees are not repaired.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Callable

from scribe_spark.reference.sequential_scribe import SequentialScribe

MESSAGE, TIMER = 1, 2
Copy = tuple[int, int, float]   # (event, node, arrival time)
Edge = tuple[int, int, int]     # (topic, parent, child)


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
    """Scribe's events, heartbeats and heartbeat timeouts on fixed trees, one happening at a time."""

    def __init__(self, scribe: SequentialScribe, link: Callable[[int, int], float], proc: float,
                 gone: dict[int, float], until: float, heartbeat_ms: float = math.inf,
                 timeout_ms: float = math.inf, phase: Callable[[int], float] = lambda _v: 0.0,
                 forward: Callable[[int, int, int, float], bool] | None = None) -> None:
        self.scribe, self.link, self.proc, self.gone, self.until = scribe, link, proc, gone, until
        self.period, self.timeout, self.phase, self.forward = heartbeat_ms, timeout_ms, phase, forward
        self.heap: list = []
        self.seq = 0
        self.sent: dict[Edge, float] = {}      # the last copy each parent sent each child
        self.heard: dict[Edge, float] = {}     # the last time each child heard from its parent
        self.out = Result()
        self.edges: dict[int, list[tuple[int, int]]] = {}   # parent -> its (topic, child) edges, in order

    def run(self, starts: list[tuple[int, int, int, float]]) -> Result:
        """Process everything before the end; `starts` has (event, topic, node, t): where and when each
        event's route ended."""
        for event, topic, node, t in starts:
            if self.scribe.roots.get(topic) == node:
                self._push(t, MESSAGE, self._copy, event, topic, node)
        edges = sorted(((t, p, c) for (t, p), kids in self.scribe.children.items() for c in kids))
        for topic, p, c in edges:
            self.edges.setdefault(p, []).append((topic, c))
        if self.period < math.inf:
            for p in sorted({p for _t, p, _c in edges}):
                self._push(self.phase(p), TIMER, self._tick, p, 0)
        for edge in edges if self.timeout < math.inf else ():
            self.heard[edge] = 0.0
            self._push(self.timeout, TIMER, self._timeout, edge, 0.0)
        while self.heap and self.heap[0][0] < self.until:
            t, _prio, _seq, handler, args = heapq.heappop(self.heap)
            handler(t, *args)
        return self.out

    def _push(self, t: float, prio: int, handler: Callable, *args) -> None:
        heapq.heappush(self.heap, (t, prio, self.seq, handler, args))
        self.seq += 1

    def _holds(self, v: int, t: float) -> bool:
        """Whether v still holds its Scribe state at t."""
        return t < self.gone.get(v, math.inf)

    def _children(self, topic: int, u: int) -> list[int]:
        return sorted(self.scribe.children.get((topic, u), ()))

    def _copy(self, t: float, event: int, topic: int, u: int) -> None:
        """A copy reaches u: delivered and sent on to each child, if u still holds the tree."""
        if not self._holds(u, t):
            return
        self.out.copies.append((event, u, t))
        if self.forward is not None and not self.forward(event, topic, u, t):
            return
        for c in self._children(topic, u):
            self.sent[(topic, u, c)] = t
            self._push(t + self.link(u, c) + self.proc, MESSAGE, self._copy, event, topic, c)
            self._push(t + self.link(u, c) + self.proc, MESSAGE, self._hear, (topic, u, c))

    def _tick(self, t: float, p: int, k: int) -> None:
        """Parent p's k-th tick: a heartbeat to each child not sent a copy since the tick before."""
        if not self._holds(p, t):
            return
        before = self.phase(p) + (k - 1) * self.period if k else -math.inf
        for topic, c in self.edges[p]:
            if self.sent.get((topic, p, c), -math.inf) > before:
                continue
            self.out.heartbeats.append(t)
            self._push(t + self.link(p, c) + self.proc, MESSAGE, self._hear, (topic, p, c))
        self._push(self.phase(p) + (k + 1) * self.period, TIMER, self._tick, p, k + 1)

    def _hear(self, t: float, edge: Edge) -> None:
        """The child hears from its parent: its heartbeat timeout starts again."""
        if self.timeout == math.inf or not self._holds(edge[2], t) or edge not in self.heard:
            return
        self.heard[edge] = t
        self._push(t + self.timeout, TIMER, self._timeout, edge, t)

    def _timeout(self, t: float, edge: Edge, since: float) -> None:
        """Nothing heard since `since`: the child declares its parent dead (once)."""
        if self.heard.get(edge) != since or not self._holds(edge[2], t):
            return
        del self.heard[edge]
        self.out.detections.append((*edge, t))


def deliver(scribe: SequentialScribe, starts: list[tuple[int, int, int, float]],
            link: Callable[[int, int], float], proc: float, gone: dict[int, float],
            until: float) -> list[Copy]:
    """Every copy that reached a node still in its tree, in the order processed (no heartbeats)."""
    return TimedEvents(scribe, link, proc, gone, until).run(starts).copies
