"""The subscriber-side TNO ordering layer.

An event (or a dummy from a subscription change) carries a timestamp {topic: counter} and
its own topics (the topics whose counter it took). A subscriber keeps sub_LC per subscribed
topic and notifies an event when, for each own topic it subscribes to, the counter is
sub_LC + 1 and, for every other topic it shares with the subscription, the counter equals
sub_LC; other events wait in a buffer. In the unreliable mode the buffer holds at most
`buffer_size` events and each waits at most `ttl`; releasing past a gap tags it out of order.
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

    def seen_by(self, topics: set) -> Event:
        """This event as a subscriber to (at most) `topics` needs it: only their counters, same order."""
        d = self.tsd()
        return Event(self.eid, tuple(sorted((t, d[t]) for t in topics if t in d)), self.own, self.dummy,
                     self.ts if self.order is None else self.order)


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

    def __post_init__(self):
        for t in self.topics:
            self.sub_lc.setdefault(t, 0)

    # -- arrivals -------------------------------------------------------------------------
    def receive(self, ev: Event, now: float) -> None:
        if ev.eid in self.seen or not (ev.own & self.topics):
            return
        self.seen.add(ev.eid)
        if not self.ordered:
            if not ev.dummy:
                self.log.append((ev.eid, now, False, now))
            return
        if self._older(ev):
            return
        self.waiting[ev.eid] = (ev, now)
        if not self.buffering:
            self.flush(now)

    def _older(self, ev: Event) -> bool:
        """An event from before this subscriber's subscription to its topic (or the subscription's
        own slot, i.e. its own dummy): discard. A dummy that took slots on several topics is kept
        while one of them is current here: it still moves that topic's sub_LC on."""
        d = ev.tsd()
        return all(t in self.since and d[t] <= self.since[t] for t in ev.own & self.topics)

    def _blocked(self, ev: Event) -> bool:
        """Whether some predecessor of ev has not been notified (nor skipped) yet."""
        d = ev.tsd()
        mine = ev.own & self.topics
        if any(d[t] > self.sub_lc[t] + 1 for t in mine):
            return True
        return any(d[t] > self.sub_lc[t] for t in self.topics & d.keys() - mine if not self._exempt(t, d[t]))

    def _late(self, ev: Event) -> bool:
        """Whether ev comes after events already notified in its place (only after a skipped gap)."""
        d = ev.tsd()
        mine = ev.own & self.topics
        return any(d[t] <= self.sub_lc[t] for t in mine) or any(
            d[t] < self.sub_lc[t] for t in self.topics & d.keys() - mine if not self._exempt(t, d[t]))

    def _exempt(self, t: int, counter: int) -> bool:
        # a counter from before this subscriber's subscription to t puts no constraint on it
        return t in self.since and counter < self.since[t]

    def missing(self) -> set[tuple[int, int]]:
        """Return the (topic, counter) slots buffered events wait for that no buffered event holds:
        what a subscriber with gap recovery asks for."""
        if self.buffering or not self.ordered:
            return set()
        have = {(t, c) for ev, _ in self.waiting.values() for t, c in ev.ts if t in ev.own}
        need: set[tuple[int, int]] = set()
        for ev, _ in self.waiting.values():
            d = ev.tsd()
            mine = ev.own & self.topics
            for t in mine:
                need.update((t, c) for c in range(self.sub_lc[t] + 1, d[t]))
            for t in self.topics & d.keys() - mine:
                if not self._exempt(t, d[t]):
                    need.update((t, c) for c in range(self.sub_lc[t] + 1, d[t] + 1))
        return need - have

    def _ready(self, ev: Event) -> bool:
        return not self._blocked(ev)

    def _notify(self, ev: Event, now: float, out_of_order: bool, arrived: float) -> None:
        d = ev.tsd()
        for t in self.topics & d.keys():
            if t in ev.own:
                self.sub_lc[t] = max(self.sub_lc[t], d[t])
        if not ev.dummy:
            self.log.append((ev.eid, now, out_of_order, arrived))

    def flush(self, now: float) -> None:
        """Notify every buffered event whose predecessors have been notified (or skipped)."""
        self._notify_ready(now)
        self._force_release(now)

    def _notify_ready(self, now: float) -> None:
        progress = True
        while progress and self.waiting:
            progress = False
            for eid in sorted(self.waiting, key=lambda e: self.waiting[e][0].sort_key):
                ev, arrived = self.waiting[eid]
                if self._ready(ev):
                    del self.waiting[eid]
                    self._notify(ev, now, self._late(ev), arrived)
                    progress = True
                    break

    # -- unreliable mode --------------------------------------------------------------------
    def _force_release(self, now: float) -> None:
        """Release past a gap when the TTL expired or the buffer is full (head first)."""
        if self.ttl is None and self.buffer_size is None:
            return
        while self.waiting:
            head_id = min(self.waiting, key=lambda e: self.waiting[e][1])   # oldest arrival
            ev, arrived = self.waiting[head_id]
            expired = self.ttl is not None and now - arrived >= self.ttl
            full = self.buffer_size is not None and len(self.waiting) > self.buffer_size
            if not (expired or full):
                return
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

    def finish_subscription(self, sub_ts: dict, now: float) -> None:
        """Set sub_LC of the added topics from the subscription timestamp, drop their older buffered
        events, flush. Topics held all along keep their sub_LC: their events, before the
        subscription or after, are still notified."""
        for t, c in sub_ts.items():
            if t in self.adding and t in self.topics:
                self.sub_lc[t] = c
                self.since[t] = c
        self.adding = set()
        for eid in [e for e, (ev, _) in self.waiting.items() if self._older(ev)]:
            del self.waiting[eid]
        self.buffering = False
        self.flush(now)

    def unsubscribe(self, topics: set) -> None:
        """Stop notifying events of these topics at once."""
        self.topics -= topics
        for t in topics:
            self.sub_lc.pop(t, None)
        for eid in [e for e, (ev, _) in self.waiting.items() if not (ev.own & self.topics)]:
            del self.waiting[eid]
