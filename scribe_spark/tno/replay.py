"""The subscribers' side of a TNO run, one subscriber at a time: what the discrete-event
simulation does at a subscriber, replayed from the times the ENS brings it each event.

Given the sequencer's output (`Simulation.released`: each event or subscription dummy with its
timestamp and release time) and the ENS delays, every subscriber is independent of the others:
its ordering layer sees its arrivals, its own subscription change and the TTL ticks in time
order. `replay` runs one subscriber; `replay_frame` runs all of them as a grouped Arrow task in
Spark. Gap recovery (asking the Scribe parent) is replayed too: a subscriber's requests, their
keyed losses and the answers depend on nothing but that subscriber's arrivals and the events
released.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa
from pyspark.broadcast import Broadcast
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from scribe_spark.columns import TIME
from scribe_spark.tno.ordering import Event, Subscriber
from scribe_spark.tno.simulation import Asking, Gaps, lost_copies

ARRIVE, START, FINISH, TICK, ASK, RECOVERED = 0, 1, 2, 3, 4, 5


@dataclass(frozen=True)
class Change:
    """A subscriber's subscription change: asked at `at`, timestamped (`ts`) by `done`."""

    at: float
    topics: frozenset
    done: float
    ts: dict


def tick_times(every: float, until: float) -> list[float]:
    """The TTL check times of the simulation's periodic tick (same float additions)."""
    out, t = [0.0], 0.0
    while t + every <= until:
        t = t + every
        out.append(t)
    return out


@dataclass
class Recovering:
    """What one subscriber's gap recovery needs in a replay: `Gaps`, its `Asking`, the events
    released (slot -> (release time, event id)), the events themselves (id -> Event) and when the
    ENS brings each event to it (id -> time, lost copies included)."""

    gaps: Gaps
    asking: Asking
    slots: dict
    events: dict
    reach: dict

    def released(self, slot: tuple, t: float) -> Event | None:
        """The event that took `slot`, if it was released by t."""
        hit = self.slots.get(slot)
        return self.events[hit[1]] if hit is not None and hit[0] <= t else None


def replay(sub: Subscriber, arrivals: list[tuple[float, Event]], change: Change | None,
           ticks: list[float], recovering: Recovering | None = None) -> Subscriber:
    """Run one subscriber's ordering layer over its arrivals (time, event), change and ticks;
    with `recovering`, its gap recovery too (the simulation's `_ask`, `_recovered`)."""
    items = [(t, ARRIVE, i, None) for i, (t, _) in enumerate(arrivals)] + [(t, TICK, i, None)
                                                                           for i, t in enumerate(ticks)]
    if change is not None:
        items += [(change.at, START, 0, None), (change.done, FINISH, 0, None)]
    heapq.heapify(items)
    later = len(items)          # the sequence numbers of what recovery schedules

    def deliver(t: float, ev: Event) -> None:
        nonlocal later
        if sub.deliver(ev, t) and recovering is not None:
            later += 1
            heapq.heappush(items, (t + recovering.gaps.after_ms, ASK, later, None))

    while items:
        t, kind, i, ev = heapq.heappop(items)
        if kind == ARRIVE:
            deliver(t, arrivals[i][1])
        elif kind == TICK:
            sub.tick(t)
        elif kind == START:
            sub.start_subscription(set(change.topics) - sub.topics)
        elif kind == FINISH:
            sub.finish_subscription(change.ts, t)
        elif kind == ASK:
            rec = recovering
            for at, got in rec.asking.ask(rec.gaps, t, sub, rec.released, rec.reach):
                later += 1
                heapq.heappush(items, (at, ASK, later, None) if got is None else (at, RECOVERED, later, got))
        elif recovering.asking.recovered_by(sub, ev):
            deliver(t, ev)
    return sub


LOG_SCHEMA = T.StructType([T.StructField("sub", T.LongType(), False),
                           T.StructField("pos", T.LongType(), False),
                           T.StructField("event", T.LongType(), False),
                           T.StructField(TIME, T.DoubleType(), False),
                           T.StructField("out_of_order", T.BooleanType(), False),
                           T.StructField("arrived", T.DoubleType(), False)])
SUMMARY = -1   # `pos` of each subscriber's summary row: event = events left waiting, at = copies lost
RECOVERY = -2  # `pos` of its gap recovery row (with recovery): event = requests and replies, at = recovered
FORCED = -3    # `pos` of its forced releases row: event = for a full buffer, at = for the TTL
PEAK = -4      # `pos` of its buffer row: event = the most events waiting at once


def _task(events: Broadcast, make: Callable[[int], Subscriber], changes: dict, ticks: list[float],
          loss: float, key: int, gaps: Gaps | None, slots: Broadcast | None, rtt: dict) -> Callable:
    def task(table: pa.Table) -> pa.Table:
        col = {name: table.column(name).to_numpy() for name in ("sub", "eid", "topic", TIME)}
        sid = int(col["sub"][0])
        lost = lost_copies(key, loss, col["eid"], col["topic"], col["sub"])
        eid, at = col["eid"][~lost], col[TIME][~lost]
        # by arrival, then event; every copy (a dummy comes on several topics), as the simulation
        # delivers each: the ordering layer takes the first it can, and each may prompt a request
        order = np.lexsort((eid, at))
        known, fresh, change = events.value, make(sid), changes.get(sid)
        arrivals = [(t, known[e]) for t, e in zip(at[order].tolist(), eid[order].tolist())]
        recovering = None
        if gaps is not None:
            # when the ENS brings each event here, lost copies included: the first copy's time
            every = np.lexsort((col[TIME], col["eid"]))
            ids, firsts = np.unique(col["eid"][every], return_index=True)
            reach = dict(zip(ids.tolist(), col[TIME][every][firsts].tolist()))
            recovering = Recovering(gaps, Asking(rtt[sid].__getitem__), slots.value, known, reach)
        sub = replay(fresh, arrivals, change, ticks, recovering)
        n = len(sub.log)
        log = list(zip(*sub.log)) if n else [[], [], [], []]
        tail = [(SUMMARY, len(sub.waiting), float(lost.sum())),
                (FORCED, sub.released.full, float(sub.released.ttl)), (PEAK, sub.released.peak, 0.0)]
        if recovering is not None:
            tail.append((RECOVERY, recovering.asking.messages, float(recovering.asking.recovered)))
        return pa.table({"sub": pa.array(np.full(n + len(tail), sid), pa.int64()),
                         "pos": pa.array(list(range(n)) + [x[0] for x in tail], pa.int64()),
                         "event": pa.array(list(log[0]) + [x[1] for x in tail], pa.int64()),
                         TIME: pa.array(list(log[1]) + [x[2] for x in tail], pa.float64()),
                         "out_of_order": pa.array(list(log[2]) + [False] * len(tail), pa.bool_()),
                         "arrived": pa.array(list(log[3]) + [0.0] * len(tail), pa.float64())})
    return task


def replay_frame(deliveries: DataFrame, events: Broadcast, make: Callable[[int], Subscriber], changes: dict,
                 ticks: list[float], loss: float, key: int, gaps: Gaps | None = None,
                 slots: Broadcast | None = None, rtt: dict | None = None) -> DataFrame:
    """Replay every subscriber in a grouped task over its deliveries (sub, eid, topic, at).

    `events` broadcasts {eid: Event}; `make(sub)` returns the subscriber's fresh ordering layer.
    Returns LOG_SCHEMA rows: each notification (pos 0.. in the subscriber's order) and one
    summary row per subscriber (pos = SUMMARY, FORCED, PEAK). Copies are lost by the simulation's keyed draws.
    With `gaps`, subscribers recover gaps as in the simulation: `slots` broadcasts {slot:
    (release time, eid)} and `rtt[sub][topic]` is the round trip to its Scribe parent; each
    subscriber then has a RECOVERY row too.
    """
    task = _task(events, make, changes, ticks, loss, key, gaps, slots, rtt or {})
    return deliveries.groupBy("sub").applyInArrow(task, LOG_SCHEMA)
