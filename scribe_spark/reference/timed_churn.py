"""Pastry and Scribe in simulated time on ONE heap, SUBSCRIBEs issued and grafted as they happen: no rounds.

The references `timed_pastry` and `timed_events` each have a heap of their own, and `churn` joins them in
rounds (`_reference_rounds`): Pastry routes a guess of SUBSCRIBEs, stopping each where the round before's
Scribe held its topic, Scribe grows its trees on those routes, its heartbeat timeouts ask for the next
round's SUBSCRIBEs, until nothing changes. This module is the sequential simulation that fixed point
stands for, written to check it: `TimedChurn` is a `TimedPastry` whose heap also holds Scribe's
happenings, processed by a `TimedEvents` (`_Tree`) that pushes onto that same heap, so that

- a child whose heartbeat timeout declares its parent dead (the fault upcall), and a subscriber at each
  return, issues its SUBSCRIBE at that very time (with `resubscribe`); the SUBSCRIBE is a lookup of the
  topicId that Pastry routes hop by hop on each node's state at the time it is there;
- at each hop Scribe's state *at that moment* decides whether the SUBSCRIBE stops there (the node
  holds the topic: a graft) or goes on (the node holds it from then), and the node takes the hop before
  as a child (a loop refused, a parent retaking a child ending the old edge, the acknowledgement the
  child's first hearing on the new edge: `TimedEvents._hop` and `_take`, reused as they are);
- an event's route that Pastry delivers at a node starts the event down the tree if that node is a root
  holding the topic then, and a SUBSCRIBE that Pastry delivers makes its last node a root.

**The one heap.** Entries are (time, priority, sequence) as in `timed_pastry`: a going down or a return
(0), a Pastry message arriving (1: a SUBSCRIBE's hop is processed by Scribe inside it), a Scribe message
arriving (1.5: an event's copy, a heartbeat, an acknowledgement), a Pastry timer (2), a Scribe timer (2.5:
a parent's heartbeat tick, a child's heartbeat timeout) and the issue of the SUBSCRIBEs asked for at that
time (2.75). So at one time every SUBSCRIBE hop comes before Scribe's own messages and timers, as in
`timed_events`, whose hops are all scheduled first; a tick at the time of a copy sent finds that copy.

**Ties and readings** the written rules leave open (as the rounds reference reads them):

- SUBSCRIBEs asked for at one time (timeouts, returns) are issued together after everything else at
  that time, in order of topic then node: their lookup ids follow the rounds' order (time, topic, node),
  which is also the SUBSCRIBE order of the (time, SUBSCRIBE, hop) rule: a holding made by a hop stops only
  the hops processed after it, which here are exactly those after it in that order (a hop at the same time
  as another SUBSCRIBE's first hop arrives from an earlier SUBSCRIBE, so comes first in both). The
  rounds' Pastry issues them before its own timers of that time: the two orders differ only when such a
  timer falls on the very time of a heartbeat timeout or a return, which has probability zero.
- A node where Pastry delivers a SUBSCRIBE is a root from that delivery on, which comes `rto_ms` per
  timeout after the SUBSCRIBE's last hop there when that node first sent it on to a dead node; an event
  whose route ends there in between is lost, as "no SUBSCRIBE made a new one yet". The run notes those
  events in `late_roots`, so that a test can see the rule at work.
- An event whose route Pastry delivers on a timer starts at once (at priority 2), not before the Scribe
  messages of that time as `timed_events` (which schedules every start first) has it: the two differ
  only when a copy arrives at the root at the very time of the delivery, which has probability zero.
- A node first met on a SUBSCRIBE's path ticks from its first heartbeat tick at or after that hop:
  `timed_events` ticks every node of every path from time 0, but a tick before the node's first hop finds
  no edge of its own in force and sends nothing.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from scribe_spark.reference.sequential_scribe import SequentialScribe
from scribe_spark.reference.timed_events import Edge, Result, TimedEvents, first_goings
from scribe_spark.reference.timed_pastry import Lookup, TimedPastry, TimedResult
from scribe_spark.sessions import Times, outages

if TYPE_CHECKING:   # for the annotation only: its .hi and .lo key arrays are all that is read
    from scribe_spark.scribe.topics import Topics

DELIVERED = ("correct", "wrong")   # a route that ended at a node (the others: lost, grafted, unfinished)
SCRIBE_SHIFT = 0.5                 # Scribe's message (1) and timer (2) priorities, after Pastry's
ISSUE = 2.75                       # the SUBSCRIBEs asked for at a time: after everything else then


@dataclass(frozen=True)
class Scribing:
    """Scribe's inputs: topics (`.hi`, `.lo` key arrays), subscriptions (topic, node), heartbeat timers."""

    topics: Topics
    subscribers: Sequence[tuple[int, int]]
    heartbeat_ms: float = math.inf
    timeout_ms: float = math.inf
    phase: Callable[[int], float] = lambda _v: 0.0
    resubscribe: bool = True
    forward: Callable[[int, int, int, float], bool] | None = None


@dataclass
class ChurnResult:
    """A one-heap run: Pastry's log (SUBSCRIBEs among its lookups from `first` on), Scribe's, and more."""

    pastry: TimedResult
    scribe: Result                                     # copies, heartbeats' send times, timeouts
    subscribes: list[tuple[float, int, int]]           # (t_issue, node, topic), SUBSCRIBE k's at k
    first: int                                         # the lookup id of SUBSCRIBE 0
    holdings: dict[tuple[int, int], list[tuple[float, float, int, int]]]   # `made_holdings`
    late_roots: list[tuple[int, int, int, float]] = field(default_factory=list)   # (topic, node, event, t)


class _Tree(TimedEvents):
    """`TimedEvents` on its owner's heap: hops given one at a time, ticks started as nodes appear."""

    def __init__(self, owner: TimedChurn, scribe: SequentialScribe,
                 spans: list[tuple[int, float, float, bool]], s: Scribing) -> None:
        super().__init__(scribe, owner.link, owner.params.proc_ms, first_goings(spans), owner.until,
                         s.heartbeat_ms, s.timeout_ms, s.phase, s.forward,
                         [(v, down, up) for v, down, up, _g in spans])
        self.owner = owner
        self.ticking: set[int] = set()

    def _push(self, t: float, prio: int, handler: Callable, *args) -> None:
        """Schedule handler(t, *args) on the shared heap, after Pastry's happenings of the same kind."""
        self.owner._push(t, prio + SCRIBE_SHIFT, handler, *args)

    def begin(self) -> None:
        """The start trees, their parents' ticks and their edges' first timeouts, as `TimedEvents.run`."""
        self._start_trees()
        for p in sorted({e[1] for e in self.info}):
            self.tick_from(p, 0.0)
        for edge in sorted(self.info) if self.timeout < math.inf else ():
            self.heard[edge] = 0.0
            self._push(self.timeout, 2, self._timeout, edge, 0.0)

    def tick_from(self, p: int, t: float) -> None:
        """Start p's heartbeat ticks at its first tick at or after t (once; t 0: its tick 0)."""
        if self.period == math.inf or p in self.ticking:
            return
        self.ticking.add(p)
        k = max(0, math.ceil((t - self.phase(p)) / self.period))
        while self.phase(p) + k * self.period < t:   # a rounding of the division
            k += 1
        self._push(self.phase(p) + k * self.period, 2, self._tick, p, k)

    def _timeout(self, t: float, edge: Edge, since: float) -> None:
        """The heartbeat timeout; a parent declared dead makes its child re-subscribe (with resubscribe)."""
        before = len(self.out.detections)
        super()._timeout(t, edge, since)
        if len(self.out.detections) > before:
            self.owner.declared(t, edge[0], edge[2])

    def is_root(self, topic: int, v: int, t: float) -> bool:
        """Whether v is a root of the topic at t."""
        return any(s <= t < e for s, e in self.rooted.get((topic, v), ()))


class TimedChurn(TimedPastry):
    """`TimedPastry` whose SUBSCRIBEs a Scribe on the same heap issues, stops and grafts as they happen."""

    def simulate(self, crashes: dict[int, Times], lookups: list[Lookup], published: Sequence[int],
                 scribing: Scribing, until_ms: float, leaves: dict[int, Times] | None = None,
                 recoveries: dict[int, Times] | None = None,
                 newcomers: set[int] | frozenset[int] = frozenset()) -> ChurnResult:
        """Run to `until_ms`: `lookups` end with one route per event (its topic in `published`, in turn),
        the SUBSCRIBEs come after them as they are issued; the rest as `TimedPastry.run`."""
        self.scribing, self.published = scribing, [int(x) for x in published]
        self.outages_in = outages(crashes, leaves, recoveries)
        self.first, self.events_from = len(lookups), len(lookups) - len(self.published)
        pastry = self.run(crashes, lookups, until_ms, leaves, recoveries, newcomers, subscribes=self.first,
                          holds=self._held)
        return ChurnResult(pastry, self.tree.out, list(self.asked), self.first, self.tree.made_holdings(),
                           self.late_roots)

    def start_scribe(self) -> SequentialScribe:
        """The trees Scribe builds from every subscription on the converged states (`node_state` at 0)."""
        state = {x: (p + s, list(rt), list(nbr)) for x, (p, s, rt, nbr) in enumerate(self._converged)}
        scribe = SequentialScribe(self.ring, state, self.scribing.topics)
        for topic, node in self.scribing.subscribers:
            scribe.subscribe(int(topic), int(node))
        return scribe

    def _reset(self, downs: set[int], lookups: list[Lookup], until_ms: float) -> None:
        """Pastry's fresh state, then Scribe's: start trees, ticks, timeouts and the returns' SUBSCRIBEs."""
        super()._reset(downs, lookups, until_ms)
        self.asked: list[tuple[float, int, int]] = []
        self.batches: dict[float, list[tuple[int, int]]] = {}
        self.late_roots: list[tuple[int, int, int, float]] = []
        self.dropped: defaultdict[tuple[int, int], list[tuple[float, int]]] = defaultdict(list)
        self.tree = _Tree(self, self.start_scribe(), self.outages_in, self.scribing)
        self.tree.begin()
        self._ask_returns()

    def _ask_returns(self) -> None:
        """Each subscriber re-subscribes at each of its returns before the end (it lost its place)."""
        if not self.scribing.resubscribe:
            return
        subscribed: defaultdict[int, list[int]] = defaultdict(list)
        for topic, node in self.scribing.subscribers:
            subscribed[int(node)].append(int(topic))
        for v, down, up, _graceful in self.outages_in:
            if down > -math.inf and up < self.until:
                for topic in subscribed.get(v, ()):
                    self._ask(up, topic, v)

    def declared(self, t: float, topic: int, child: int) -> None:
        """A child declared its parent dead at t: it re-subscribes then (with resubscribe)."""
        if self.scribing.resubscribe:
            self._ask(t, topic, child)

    def _ask(self, t: float, topic: int, node: int) -> None:
        """Node asks for a SUBSCRIBE of the topic at t: issued with the others asked for at t."""
        if t not in self.batches:
            self.batches[t] = []
            self._push(t, ISSUE, self._issue_asked)
        self.batches[t].append((topic, node))

    def _issue_asked(self, t: float) -> None:
        """Issue the SUBSCRIBEs asked for at t, by topic then node: each a lookup of its topicId."""
        topics = self.scribing.topics
        for topic, node in sorted(self.batches.pop(t)):
            lid = self._add_lookup(t, node, int(topics.hi[topic]), int(topics.lo[topic]))
            self.asked.append((t, node, topic))
            self.tree.going.append(True)
            self._issue(t, lid)

    def _held(self, lid: int, v: int, t: float, _hop: int) -> bool:
        """Whether v holds SUBSCRIBE lid's topic as its hop arrives: Scribe's state now decides."""
        return self.tree._holding(self.asked[lid - self.first][2], v, t) is not None

    def _hop(self, lid: int, v: int, t: float) -> None:
        """Log a SUBSCRIBE's hop at v and apply Scribe's forward upcall there at once."""
        super()._hop(lid, v, t)
        if lid >= self.first:
            k = lid - self.first
            hops = self.paths[lid]
            self.tree.tick_from(v, t)
            self.tree._hop(t, k, self.asked[k][2], hops, len(hops) - 1, None)   # a root: at `_finish`

    def _finish(self, lid: int, outcome: str, dest: int, t: float) -> None:
        """Log the route's end; a delivered event starts down its tree, a delivered SUBSCRIBE makes a root."""
        super()._finish(lid, outcome, dest, t)
        if outcome not in DELIVERED or lid < self.events_from:
            return
        if lid >= self.first:
            self._root(lid, t)
        else:
            self._start_event(t, lid - self.events_from, dest)

    def _start_event(self, t: float, event: int, node: int) -> None:
        """The event's route ended at node: down the tree if node is a root then (noted if it is not)."""
        topic = self.published[event]
        if not self.tree.is_root(topic, node, t):
            self.dropped[(topic, node)].append((t, event))
        self.tree._start(t, event, topic, node)

    def _root(self, lid: int, t: float) -> None:
        """Pastry delivered the SUBSCRIBE at t: its last node is a root from then, for its holding then;
        the events' routes that ended there, lost, since the SUBSCRIBE's hop are noted (`late_roots`)."""
        topic = self.asked[lid - self.first][2]
        v, at = self.paths[lid][-1]
        end = self.tree._holding(topic, v, at)[1]
        self.tree.rooted.setdefault((topic, v), []).append((t, end))
        self.late_roots += [(topic, v, e, te) for te, e in self.dropped.get((topic, v), ()) if at <= te < end]
