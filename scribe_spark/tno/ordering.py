"""The subscriber-side TNO ordering layer.

An event (or a dummy from a subscription change) carries a timestamp {topic: counter} and
its own topics (the topics whose counter it took). A subscriber keeps sub_LC per subscribed
topic and notifies an event when, for each own topic it subscribes to, the counter is
sub_LC + 1 and, for every other topic it shares with the subscription, the counter equals
sub_LC; other events wait in a buffer. In the unreliable mode the buffer holds at most
`buffer_size` events and each waits at most `ttl`; releasing past a gap tags it out of order,
and `released` counts such releases by cause.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property


@dataclass(frozen=True)
class Event:
    eid: int
    ts: tuple                 # sorted (topic, counter) pairs
    own: frozenset            # topics whose counter this event took
    dummy: bool = False
    order: tuple | None = field(default=None, compare=False)   # the sort key among ready events (ts if None)

    def tsd(self) -> dict[int, int]:
        return self._tsd

    @cached_property
    def _tsd(self) -> dict[int, int]:
        return dict(self.ts)

    @property
    def sort_key(self) -> tuple:
        return self.ts if self.order is None else self.order


@dataclass
class Released:
    """A subscriber's forced releases by cause, and the most events it ever held waiting."""

    full: int = 0     # released at the head because the buffer was full
    ttl: int = 0      # released because they waited `ttl` (and the buffer was not full)
    peak: int = 0     # the most events waiting at once, every ready one notified, before forced releases

    def add(self, other: Released) -> Released:
        """Both subscribers' releases summed, and the larger peak."""
        return Released(self.full + other.full, self.ttl + other.ttl, max(self.peak, other.peak))


@dataclass
class Subscriber:
    """One client's ordering layer; `ordered=False` notifies in arrival order (no TNO layer)."""

    sid: int
    topics: set
    ordered: bool = True
    buffer_size: int | None = None
    ttl: float | None = None
    sub_lc: dict = field(default_factory=dict)
    waiting: dict = field(default_factory=dict)        # eid -> (event, arrival time)
    log: list = field(default_factory=list)            # notified events: (eid, time, out_of_order, arrived)
    seen: set = field(default_factory=set)
    since: dict = field(default_factory=dict)          # topic -> counter of the subscription's own slot
    buffering: bool = False                            # waiting for its subscription timestamp
    adding: set = field(default_factory=set)           # topics of the subscription change in progress
    # no waiting event is ready, and nothing it depends on changed since that was found
    settled: bool = field(default=True, init=False, repr=False)
    released: Released = field(default_factory=lambda: Released(), init=False)

    def __post_init__(self):
        for t in self.topics:
            self.sub_lc.setdefault(t, 0)
        self.settled = not self.waiting

    # -- arrivals -------------------------------------------------------------------------
    def deliver(self, ev: Event, now: float) -> bool:
        """The ENS (or a recovery) brings ev: take it if it is on a topic held here; return whether
        events still wait (a subscriber with gap recovery then asks, a while later). Calls come in
        time order (`now` never decreases), as a discrete-event simulation makes them."""
        if ev.own & self.topics:
            self.receive(ev, now)
            return bool(self.waiting)
        return False

    def tick(self, now: float) -> None:
        """The periodic TTL check: release what waited too long (not while buffering)."""
        if self.waiting and not self.buffering:
            self.flush(now)

    def receive(self, ev: Event, now: float) -> None:
        if ev.eid in self.seen or not (ev.own & self.topics):
            return
        self.seen.add(ev.eid)
        if not self.ordered:
            if not ev.dummy:
                self.log.append((ev.eid, now, False, now))
            return
        if self.since and self._older(ev):
            return
        # `now` never decreases, so `waiting` is in arrival order (what `_force_release` relies on)
        self.waiting[ev.eid] = (ev, now)
        if not self.buffering:
            self.flush(now, ev)     # counts the peak itself, before any forced release
        else:
            self.released.peak = max(self.released.peak, len(self.waiting))

    def _older(self, ev: Event) -> bool:
        """An event from before this subscriber's subscription to its topic (or the subscription's
        own slot, i.e. its own dummy): discard. A dummy that took slots on several topics is kept
        while one of them is current here: it still moves that topic's sub_LC on."""
        d = ev.tsd()
        return all(t in self.since and d[t] <= self.since[t] for t in ev.own & self.topics)

    def _blocked(self, ev: Event) -> bool:
        """Whether some predecessor of ev has not been notified (nor skipped) yet: the counter of
        one of its own topics is past sub_LC + 1, or another shared topic's is past sub_LC."""
        d, own, lc = ev.tsd(), ev.own, self.sub_lc
        for t in self.topics:
            c = d.get(t)
            if c is not None and (c > lc[t] + 1 if t in own else c > lc[t] and not self._exempt(t, c)):
                return True
        return False

    def _late(self, ev: Event) -> bool:
        """Whether ev comes after events already notified in its place (only after a skipped gap)."""
        d, own, lc = ev.tsd(), ev.own, self.sub_lc
        for t in self.topics:
            c = d.get(t)
            if c is not None and (c <= lc[t] if t in own else c < lc[t] and not self._exempt(t, c)):
                return True
        return False

    def _exempt(self, t: int, counter: int) -> bool:
        # a counter from before this subscriber's subscription to t puts no constraint on it
        return bool(self.since) and t in self.since and counter < self.since[t]

    def missing(self) -> set[tuple[int, int]]:
        """Return the (topic, counter) slots buffered events wait for that no buffered event holds:
        what a subscriber with gap recovery asks for."""
        if self.buffering or not self.ordered:
            return set()
        have, end = set(), {}
        for ev, _ in self.waiting.values():
            d = ev.tsd()
            have.update((t, d[t]) for t in ev.own if t in d)
            for t in self.topics:
                c = d.get(t)
                # own topics: the counters before c; others: up to c itself (unless exempt)
                if c is not None and (t in ev.own or not self._exempt(t, c)):
                    end[t] = max(end.get(t, 0), c if t in ev.own else c + 1)
        # every wait on t starts right after sub_LC, so the union of the waits is one range per topic
        need = {(t, k) for t, e in end.items() for k in range(self.sub_lc[t] + 1, e)}
        return need - have

    def _notify(self, ev: Event, now: float, out_of_order: bool, arrived: float) -> None:
        d, lc = ev.tsd(), self.sub_lc
        for t in ev.own:
            if t in self.topics and t in d and d[t] > lc[t]:
                lc[t] = d[t]
        self.settled = False
        if not ev.dummy:
            self.log.append((ev.eid, now, out_of_order, arrived))

    def flush(self, now: float, new: Event | None = None) -> None:
        """Notify every buffered event whose predecessors have been notified (or skipped); `new` is
        the event just buffered, the only one that can have become ready if nothing else changed."""
        self._notify_ready(now, new)
        # what the buffer must hold for no release to be forced: counted before the releases
        self.released.peak = max(self.released.peak, len(self.waiting))
        self._force_release(now)

    def _notify_ready(self, now: float, new: Event | None = None) -> None:
        """Notify, again and again, the first ready event in timestamp order."""
        if self.settled and (new is None or self._blocked(new)):
            return      # the others were blocked and still are: readiness depends on sub_LC alone
        waiting = self.waiting
        order = sorted(waiting, key=lambda e: waiting[e][0].sort_key)   # stable: ties in arrival order
        i = 0
        while i < len(order):
            ev, arrived = waiting[order[i]]
            if self._blocked(ev):
                i += 1
                continue
            del waiting[order.pop(i)]
            self._notify(ev, now, self._late(ev), arrived)
            i = 0
        self.settled = True

    # -- unreliable mode --------------------------------------------------------------------
    def _force_release(self, now: float) -> None:
        """Release past a gap when the TTL expired or the buffer is full (head first)."""
        if self.ttl is None and self.buffer_size is None:
            return
        while self.waiting:
            head_id = next(iter(self.waiting))      # the oldest arrival (see `receive`)
            ev, arrived = self.waiting[head_id]
            expired = self.ttl is not None and now - arrived >= self.ttl
            full = self.buffer_size is not None and len(self.waiting) > self.buffer_size
            if not (expired or full):
                return
            if full:
                self.released.full += 1
            else:
                self.released.ttl += 1
            del self.waiting[head_id]
            self._notify(ev, now, True, arrived)
            self._notify_ready(now)

    # -- subscription changes ----------------------------------------------------------------
    def start_subscription(self, new_topics: set) -> None:
        """Subscribe with the ENS to new topics and buffer until the subscription timestamp returns."""
        self.topics |= new_topics
        for t in new_topics:
            self.sub_lc.setdefault(t, 0)
        self.adding |= new_topics
        self.buffering = True
        self.settled = False

    def finish_subscription(self, sub_ts: dict, now: float) -> None:
        """Set sub_LC of the added topics from the subscription timestamp, drop their older buffered
        events, flush. Topics held all along keep their sub_LC: their events, before the
        subscription or after, are still notified."""
        for t, c in sub_ts.items():
            if t in self.adding and t in self.topics:
                self.sub_lc[t] = c
                self.since[t] = c
        self.adding = set()
        self.settled = False
        for eid in [e for e, (ev, _) in self.waiting.items() if self._older(ev)]:
            del self.waiting[eid]
        self.buffering = False
        self.flush(now)

    def unsubscribe(self, topics: set) -> None:
        """Stop notifying events of these topics at once."""
        self.topics -= topics
        for t in topics:
            self.sub_lc.pop(t, None)
        self.settled = False
        for eid in [e for e, (ev, _) in self.waiting.items() if not (ev.own & self.topics)]:
            del self.waiting[eid]
