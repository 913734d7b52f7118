"""Discrete-event simulation of TNO: publishers, the multistage sequencer, the ENS, subscribers.

Time is in milliseconds. Sequencer messages travel between clients and servers over
"short" (same region, 10 ± 2 ms) or "long" (other region, 100 ± 10 ms) links, FIFO per
link. Servers are finite: the TMs of a server share its `cores` cores; a stage that reads or
writes the timestamp costs `service_ms` on one core and every message the server receives from
or sends to the network `message_ms`; work waits in a FIFO queue per server, and each TM
serves one message at a time (so a TM's stages keep their order). `cores=None` and
`message_ms=0` leave each TM its own queue, servers without limits. The ENS is a function giving,
for an event published by a client on a topic, each receiving subscriber's delay. ENS losses
are drawn by key (event, topic, subscriber), not from the run's stream, so the sequencer's
random draws do not depend on the ENS and a run can be split: the sequencer here, the ENS and
the subscribers elsewhere (`tno.replay`), with the same outcome.

Chains follow one of the sequencer's chain rules (see `sequencer`); with `etree` or `interval`,
FIFO links suffice.
"""
from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from scribe_spark.tno.dissemination import keyed_uniform, keyed_uniform_one
from scribe_spark.tno.ordering import Event, Subscriber
from scribe_spark.tno.sequencer import RELAY, Sequencer

SHORT_MS, SHORT_SD, LONG_MS, LONG_SD = 10.0, 2.0, 100.0, 10.0


@dataclass
class Placement:
    """Where TMs and clients are: TM of topic t on server server_of[t]; regions decide link length."""

    server_of: dict
    server_region: list
    client_region: dict

    def delay(self, region_a: int, region_b: int, rng: np.random.Generator) -> float:
        if region_a == region_b:
            return max(0.1, rng.normal(SHORT_MS, SHORT_SD))
        return max(1.0, rng.normal(LONG_MS, LONG_SD))


def contiguous_placement(topics: list[int], servers: int, clients: list[int], regions: int,
                         rng: np.random.Generator) -> Placement:
    """TMs in contiguous ranges of `topics` (given in precedence order) over `servers` servers;
    servers and clients spread over regions."""
    per = int(np.ceil(len(topics) / servers))
    server_of = {t: i // per for i, t in enumerate(topics)}
    return Placement(server_of, [s % regions for s in range(servers)],
                     {c: int(rng.integers(regions)) for c in clients})


def site_placement(topics: int, sites: int, clients: int) -> Placement:
    """The TNO paper's geo-distributed deployment: one server per site (region s = server s), TMs
    of topics in contiguous id ranges of equal size (within one topic), and the clients in equal
    contiguous blocks over the sites."""
    return Placement({t: t * sites // topics for t in range(topics)}, list(range(sites)),
                     {c: c * sites // clients for c in range(clients)})


@dataclass
class Recovery:
    """Loss recovery. A subscriber whose buffered events still wait on a missing predecessor
    `after_ms` after an arrival asks its Scribe parent for it (`rtt(topic, subscriber)` ms there
    and back; the parent holds an event from half that before the ENS brings it to the
    subscriber, so asking never beats a delivery that is not lost); a request or reply is lost
    like an ENS delivery, and a slot not answered within `timeout_ms` is asked again. Sequencer
    messages are lost with `sequencer_loss` and sent again by their sender after `timeout_ms`
    (FIFO kept: later messages on the link wait behind the resent one; a resend is not lost
    again). Its random draws come
    from its own generators, so the ENS and sequencer losses are the same with and without recovery;
    a request's and its reply's losses are draws keyed by (key, subscriber, slot, attempt), so each
    subscriber's recovery can run on its own (`tno.replay`) with the same outcome."""

    rtt: Callable[[int, int], float]
    rng: np.random.Generator
    after_ms: float = 50.0
    timeout_ms: float = 300.0
    sequencer_loss: float = 0.0
    enabled: bool = True            # False: sequencer losses and resends only, no gap recovery

    def __post_init__(self) -> None:
        # sequencer losses draw from their own stream: the same with and without gap recovery
        self.seq_rng = np.random.default_rng(self.rng.integers(2**63))
        self.key = int(self.rng.integers(2**62))

    def gaps(self, loss: float) -> Gaps:
        """What every subscriber's gap recovery shares, with requests and replies lost at `loss`."""
        return Gaps(self.key, loss, self.after_ms, self.timeout_ms)


@dataclass(frozen=True)
class Gaps:
    """Gap recovery's parameters, the same at every subscriber (see `Recovery`)."""

    key: int
    loss: float
    after_ms: float
    timeout_ms: float


@dataclass
class Asking:
    """One subscriber's gap recovery: its open requests and what they cost."""

    rtt: Callable[[int], float]                   # topic -> round trip to its Scribe parent there (ms)
    until: dict = field(default_factory=dict)     # slot -> until when it waits for an answer
    tries: dict = field(default_factory=dict)     # slot -> requests sent for it so far
    messages: int = 0                             # requests and replies
    recovered: int = 0                            # events it got by asking

    def ask(self, gaps: Gaps, t: float, sub: Subscriber, released: Callable[[tuple, float], Event | None],
            reach: dict) -> list[tuple[float, Event | None]]:
        """Ask the Scribe parent for every slot `sub`'s buffered events still miss.

        `released(slot, t)` is the event that took the slot if it was published by t; `reach`
        maps an event id to when the ENS brings it to `sub` (lost or not). Returns what follows,
        in slot order: (time, event) — the event arrives then — or (time, None) — ask again then.
        """
        follow = []
        for slot in sorted(sub.missing()):
            if t < self.until.get(slot, -1.0):
                continue                                   # asked recently: wait for the answer
            deadline = self.until[slot] = t + gaps.timeout_ms
            attempt = self.tries[slot] = self.tries.get(slot, 0) + 1
            self.messages += 1                             # the request
            rtt = self.rtt(slot[0])
            ev = released(slot, t)
            # the parent holds the event one tree hop before the ENS brings it to this subscriber
            held = ev is not None and reach.get(ev.eid, t) - rtt / 2 <= t + rtt / 2
            request, reply = (keyed_uniform_one(gaps.key, sub.sid, slot[0], slot[1], attempt, r)
                              for r in (0, 1))
            if request >= gaps.loss:                       # the request arrived
                self.messages += 1                         # the reply: the event, or "not yet"
                if held and reply >= gaps.loss:
                    follow.append((t + rtt, ev))
                    continue
            follow.append((deadline, None))                # lost, or not there yet: ask again then
        return follow

    def recovered_by(self, sub: Subscriber, ev: Event) -> bool:
        """Count `ev` as recovered if `sub` takes it and has not seen it; return whether it does."""
        if ev.own & sub.topics and ev.eid not in sub.seen:
            self.recovered += 1
            return True
        return False


@dataclass
class Stats:
    latency: list = field(default_factory=list)          # timestamp latency per event (ms)
    entries: list = field(default_factory=list)          # entries of each event's timestamp
    visited: list = field(default_factory=list)          # TMs each event's chain visited
    completed_at: list = field(default_factory=list)
    bytes_out: dict = field(default_factory=dict)        # server -> inter-server bytes sent
    bytes_in: dict = field(default_factory=dict)         # server -> bytes of the requests it received
    lost: int = 0
    recovery_messages: int = 0                           # gap recovery requests and replies (run() sums)
    recovered: int = 0                                   # events subscribers got by asking (run() sums)
    resent: int = 0                                      # sequencer messages lost and sent again


class Simulation:
    """One run: schedule publications and subscription changes, then `run()`."""

    def __init__(self, seq: Sequencer, placement: Placement, subscribers: dict[int, Subscriber],
                 ens: Callable | None, rng: np.random.Generator, service_ms: float = 0.0, loss: float = 0.0,
                 recovery: Recovery | None = None, loss_key: int = 0, message_ms: float = 0.0,
                 cores: int | None = None):
        self.seq, self.place, self.subs, self.ens, self.rng = seq, placement, subscribers, ens, rng
        self.service_ms, self.loss, self.recovery, self.loss_key = service_ms, loss, recovery, loss_key
        self.message_ms, self.cores = message_ms, cores
        self.idle_cores: dict[int, int] = {}          # server -> cores not serving a stage now
        self.waiting: dict[int, deque] = {}           # TM -> its stages waiting, in arrival order
        self.runnable: dict[int, list] = {}           # server -> heap of (first waiting stage's order, TM)
        self.busy_tm: set = set()                     # TMs serving a stage now
        self.server_busy: dict[int, float] = {}       # server -> core time it spent (ms)
        self.released: list = []    # (time, client, topics, event): what goes on the ENS, in order
        self.published: dict = {}   # event id -> (publisher, when it asked for the timestamp)
        self.by_slot: dict = {}     # (topic, counter) -> the published event that took that slot
        self.asking: dict = {}      # subscriber -> its gap recovery (Asking)
        self.reach: dict = {}       # subscriber -> {event id: when the ENS brings it there (lost or not)}
        self.gaps = recovery.gaps(loss) if recovery is not None else None
        self.heap: list = []
        self.n = 0
        self.requests = 0           # sequencer requests started (events and subscriptions)
        self.tm_free: dict = {}
        self.tm_work: dict = {}     # TM -> stages it served that read or wrote a timestamp
        self.link_last: dict = {}
        self.stats = Stats()
        self.next_eid = 0
        self.members: dict[int, set] = {}
        for sid, s in subscribers.items():
            for t in s.topics:
                self.members.setdefault(t, set()).add(sid)

    # -- engine --------------------------------------------------------------------------------
    def at(self, t: float, fn: Callable, *args) -> None:
        self.n += 1
        heapq.heappush(self.heap, (t, self.n, fn, args))

    def run(self, until: float = float("inf")) -> None:
        while self.heap and self.heap[0][0] <= until:
            t, _, fn, args = heapq.heappop(self.heap)
            fn(t, *args)
        # gap recovery's totals: what each subscriber's Asking counted
        self.stats.recovery_messages = sum(a.messages for a in self.asking.values())
        self.stats.recovered = sum(a.recovered for a in self.asking.values())

    def _send(self, t: float, src: tuple, dst: tuple, size: int) -> float:
        """Arrival time of a message on the FIFO link src -> dst (('c', id) or ('s', id))."""
        if src == dst:
            return t      # inside one server: no delay, and sends leave in processing order
        ra = self.place.client_region[src[1]] if src[0] == "c" else self.place.server_region[src[1]]
        rb = self.place.client_region[dst[1]] if dst[0] == "c" else self.place.server_region[dst[1]]
        arrive = t + self.place.delay(ra, rb, self.rng)
        rec = self.recovery
        if rec is not None and rec.sequencer_loss and rec.seq_rng.random() < rec.sequencer_loss:
            arrive += rec.timeout_ms      # lost: the sender's timeout fires and it sends again
            self.stats.resent += 1
        if src[0] == "s" and dst[0] == "s":
            self.stats.bytes_out[src[1]] = self.stats.bytes_out.get(src[1], 0) + size
        if dst[0] == "s":
            self.stats.bytes_in[dst[1]] = self.stats.bytes_in.get(dst[1], 0) + size
        arrive = max(arrive, self.link_last.get((src, dst), -1.0) + 1e-6)
        self.link_last[(src, dst)] = arrive
        return arrive

    def _size(self, topics: set) -> int:
        """Bytes of one sequencer message for a request on `topics` (fixed for the whole chain)."""
        entries = len(set().union(*(self.seq.view(t) for t in topics)))
        return 24 + 12 * entries    # header + (4-byte topic, 8-byte counter) per entry

    # -- publications ---------------------------------------------------------------------------
    def publish(self, t: float, client: int, topic: int) -> None:
        """Client asks the sequencer for a timestamp, then publishes event+timestamp on the ENS."""
        eid = self.next_eid
        self.next_eid += 1
        self.requests += 1
        self.published[eid] = (client, t)
        chain, plan = self.seq.event_plan(topic)
        meta = dict(eid=eid, client=client, topic=topic, start=t, kind="event", own=frozenset([topic]),
                    size=self._size({topic}), plan=plan)
        first = ("s", self.place.server_of[chain[0]])
        self.at(self._send(t, ("c", client), first, meta["size"]), self._tm_arrive, chain, 0, {}, meta)

    def subscribe(self, t: float, client: int, topics: set) -> None:
        """Client adds topics: ENS subscription and buffering now, subscription timestamp via the TMs
        (with groups that follow subscriptions, through the topics it holds already too, each TM
        recording the whole new subscription)."""
        held = set(self.subs[client].topics)
        topics = set(topics) - held
        if not topics:
            return
        self.requests += 1
        self.subs[client].start_subscription(topics)
        for u in topics:
            self.members.setdefault(u, set()).add(client)
        live = self.seq.live is not None
        through = held if live else set()      # held topics the request visits too
        chain = self.seq.subscription_chain(topics, through)
        meta = dict(eid=None, client=client, topic=None, start=t, kind="subscription", own=frozenset(topics),
                    size=self._size(topics | through), plan=self.seq.plan(chain, topics, True, through),
                    record=frozenset(held | topics) if live else None)
        first = ("s", self.place.server_of[chain[0]])
        self.at(self._send(t, ("c", client), first, meta["size"]), self._tm_arrive, chain, 0, {}, meta)

    def unsubscribe(self, t: float, client: int, topics: set) -> None:
        """Stop notifying at once; the ENS stops delivering (TMs' clocks are not changed). With groups
        that follow subscriptions, the new subscription goes to the TMs of the old one's topics."""
        held = frozenset(self.subs[client].topics)
        self.subs[client].unsubscribe(set(topics))
        for u in topics:
            self.members.get(u, set()).discard(client)
        if self.seq.live is None or not held & set(topics):
            return
        chain = self.seq.subscription_chain(set(), held)
        meta = dict(eid=None, client=client, topic=None, start=t, kind="unsubscription", own=frozenset(),
                    size=self._size(set(held)), plan=tuple((tm in held, RELAY) for tm in chain),
                    record=held - set(topics))
        first = ("s", self.place.server_of[chain[0]])
        self.at(self._send(t, ("c", client), first, meta["size"]), self._tm_arrive, chain, 0, {}, meta)

    def _idle_at(self, t: float) -> bool:
        """True when nothing else is due at or before t, so a step at t can run right away."""
        return not self.heap or self.heap[0][0] > t

    def _tm_arrive(self, t: float, chain: Sequence[int], i: int, ts: dict, meta: dict) -> None:
        self._walk(t, chain, i, ts, meta, staged=False)

    def _tm_process(self, t: float, chain: Sequence[int], i: int, ts: dict, meta: dict) -> None:
        self._walk(t, chain, i, ts, meta, staged=True)

    def _walk(self, t: float, chain: Sequence[int], i: int, ts: dict, meta: dict, staged: bool) -> None:
        """Move a request along its chain, each stage served as `_serve` says. Steps due now run in
        this loop instead of the event heap when nothing else is due first (same order as the heap,
        far fewer heap operations)."""
        plan = meta["plan"]       # (is_work, action) per stage
        while True:
            tm = chain[i]
            work, action = plan[i]
            if not staged and self.cores is not None:
                self._enqueue(t, chain, i, ts, meta)    # the server runs it when a core and the TM are free
                return
            if not staged:
                done = self._serve(t, chain, i, work)
                self.tm_work[tm] = self.tm_work.get(tm, 0) + work
                if done > t or not self._idle_at(t):
                    self.at(done, self._tm_process, chain, i, ts, meta)
                    return
            if meta.get("record") is not None:      # groups that follow subscriptions: TMs learn them
                self.seq.record(tm, meta["client"], meta["record"])
            elif i == 0 and self.seq.live is not None and meta["kind"] == "event":
                # TM_T builds the timestamp's structure by SG_T as it knows it now
                chain, meta["plan"] = self.seq.event_plan(meta["topic"])
                plan, meta["size"] = meta["plan"], self._size({meta["topic"]})
            self.seq.stage(tm, action, ts)
            here = ("s", self.place.server_of[tm])
            if i + 1 == len(chain):
                self.at(self._send(t, here, ("c", meta["client"]), meta["size"]), self._returned, dict(ts),
                        meta)
                return
            arrive = self._send(t, here, ("s", self.place.server_of[chain[i + 1]]), meta["size"])
            i, staged = i + 1, False
            if arrive > t or not self._idle_at(t):
                self.at(arrive, self._tm_arrive, chain, i, ts, meta)
                return

    def _cost(self, chain: Sequence[int], i: int, work: bool) -> float:
        """Core time of stage i of a chain: `service_ms` if it reads or writes the timestamp (relays
        cost nothing) and `message_ms` per message it takes from or puts on the network."""
        cost = self.service_ms if work else 0.0
        if self.message_ms:
            server = self.place.server_of[chain[i]]
            came = i == 0 or self.place.server_of[chain[i - 1]] != server
            goes = i + 1 == len(chain) or self.place.server_of[chain[i + 1]] != server
            cost += self.message_ms * (came + goes)
        return cost

    def _serve(self, t: float, chain: Sequence[int], i: int, work: bool) -> float:
        """When stage i of a chain, arriving at t, is done on a server without limits: each TM serves
        one message at a time."""
        tm = chain[i]
        done = max(t, self.tm_free.get(tm, 0.0)) + self._cost(chain, i, work)
        self.tm_free[tm] = done
        return done

    def _enqueue(self, t: float, chain: Sequence[int], i: int, ts: dict, meta: dict) -> None:
        """A stage arrives at its TM's server: it waits behind its TM's earlier stages."""
        tm = chain[i]
        self.n += 1
        line = self.waiting.setdefault(tm, deque())
        line.append((self.n, chain, i, ts, meta))
        if len(line) == 1 and tm not in self.busy_tm:
            heapq.heappush(self.runnable.setdefault(self.place.server_of[tm], []), (self.n, tm))
        self._dispatch(t, self.place.server_of[tm])

    def _dispatch(self, t: float, server: int) -> None:
        """Give the server's idle cores to the waiting stages, first come first served among TMs that
        are not serving one already (a TM's stages keep their order; other TMs do not wait on it)."""
        idle = self.idle_cores.get(server, self.cores)
        ready = self.runnable.get(server, [])
        while idle and ready:
            _, tm = heapq.heappop(ready)
            _, chain, i, ts, meta = self.waiting[tm].popleft()
            work = meta["plan"][i][0]
            cost = self._cost(chain, i, work)
            self.busy_tm.add(tm)
            idle -= 1
            self.tm_work[tm] = self.tm_work.get(tm, 0) + work
            self.server_busy[server] = self.server_busy.get(server, 0.0) + cost
            self.tm_free[tm] = t + cost
            self.at(t + cost, self._served, server, chain, i, ts, meta)
        self.idle_cores[server] = idle

    def _served(self, t: float, server: int, chain: Sequence[int], i: int, ts: dict, meta: dict) -> None:
        """A stage is done: free its core and TM, apply it and send the request on, serve the next."""
        tm = chain[i]
        self.idle_cores[server] += 1
        self.busy_tm.discard(tm)
        if self.waiting[tm]:
            heapq.heappush(self.runnable[server], (self.waiting[tm][0][0], tm))
        self._walk(t, chain, i, ts, meta, staged=True)
        self._dispatch(t, server)

    def _returned(self, t: float, ts: dict, meta: dict) -> None:
        """A request's chain ends: its timestamp goes back to the client, which publishes the event
        (or, for a subscription, the dummy event its new topics start from)."""
        if meta["kind"] == "unsubscription":
            return                  # the TMs have recorded it: nothing comes back to publish
        self.stats.latency.append(t - meta["start"])
        self.stats.completed_at.append(t)
        client = meta["client"]
        if meta["kind"] == "subscription":
            self.subs[client].finish_subscription(ts, t)
            eid = -1 - len(self.stats.latency)   # dummies get negative ids
            ev = Event(eid, tuple(sorted(ts.items())), meta["own"], dummy=True)
            self.released.append((t, client, sorted(meta["own"]), ev))
            for topic in sorted(meta["own"]):
                self._disseminate(t, client, topic, ev)
        else:
            ev = Event(meta["eid"], tuple(sorted(ts.items())), meta["own"])
            self.stats.entries.append(len(ts))
            self.stats.visited.append(len(meta["plan"]))
            self.released.append((t, client, [meta["topic"]], ev))
            self._disseminate(t, client, meta["topic"], ev)

    def _disseminate(self, t: float, client: int, topic: int, ev: Event) -> None:
        if self.ens is None:
            return
        d = ev.tsd()
        for u in ev.own:
            self.by_slot[(u, d[u])] = ev
        receivers = sorted(self.members.get(topic, ()))
        delays = self.ens(ev.eid, client, topic, receivers, self.rng)
        lost = lost_copies(self.loss_key, self.loss, ev.eid, topic, receivers)
        for sid, d, gone in zip(receivers, delays, lost):
            if self.recovery is not None and self.recovery.enabled:   # when the ENS brings it (lost or not)
                reach = self.reach.setdefault(sid, {})
                reach[ev.eid] = min(t + d, reach.get(ev.eid, float("inf")))
            if gone:
                self.stats.lost += 1
                continue
            self.at(t + d, self._deliver, sid, ev)

    def _deliver(self, t: float, sid: int, ev: Event) -> None:
        if self.subs[sid].deliver(ev, t) and self.recovery is not None and self.recovery.enabled:
            self.at(t + self.recovery.after_ms, self._ask, sid)

    # -- loss recovery ---------------------------------------------------------------------------
    def _ask(self, t: float, sid: int) -> None:
        """Ask the Scribe parent for every slot the subscriber's buffered events still miss."""
        asking = self.asking.get(sid)
        if asking is None:
            rtt = self.recovery.rtt
            asking = self.asking[sid] = Asking(lambda topic: rtt(topic, sid))
        for at, ev in asking.ask(self.gaps, t, self.subs[sid], self._released, self.reach.get(sid, {})):
            if ev is None:
                self.at(at, self._ask, sid)
            else:
                self.at(at, self._recovered, sid, ev)

    def _released(self, slot: tuple, t: float) -> Event | None:
        return self.by_slot.get(slot)      # filled as events are released: those released by t

    def _recovered(self, t: float, sid: int, ev: Event) -> None:
        if self.asking[sid].recovered_by(self.subs[sid], ev):
            self._deliver(t, sid, ev)

    def tick(self, t: float, every: float, until: float) -> None:
        """Periodic TTL check for the unreliable mode."""
        for s in self.subs.values():
            s.tick(t)
        if t + every <= until:
            self.at(t + every, self.tick, every, until)


def lost_copies(key: int, loss: float, eid, topic, receivers) -> np.ndarray:
    """Whether each receiver's copy of the event on the topic is lost (a draw keyed by all three)."""
    if not loss:
        return np.zeros(len(receivers), dtype=bool)
    return keyed_uniform(key, eid, topic, np.asarray(receivers, dtype=np.int64)) < loss


def random_ens(mean_ms: float) -> Callable:
    """An ENS with independent exponential delays per delivery (reorders freely)."""
    def ens(eid, client, topic, receivers, rng):
        return rng.exponential(mean_ms, size=len(receivers))
    return ens
