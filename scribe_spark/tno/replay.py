"""The subscribers' side of a TNO run, one subscriber at a time: what the discrete-event
simulation does at a subscriber, replayed from the times the ENS brings it each event.

Given the sequencer's output (`Simulation.released`: each event or subscription dummy with its
timestamp and release time) and the ENS delays, every subscriber is independent of the others:
its ordering layer sees its arrivals, its own subscription change and the TTL ticks in time
order. `replay` runs one subscriber; `replay_frame` runs all of them as a grouped Arrow task in
Spark. Gap recovery (asking the Scribe parent) is not replayed: it runs in the simulation only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa
from pyspark.broadcast import Broadcast
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from scribe_spark.tno.ordering import Event, Subscriber
from scribe_spark.tno.simulation import lost_copies

ARRIVE, START, FINISH, TICK = 0, 1, 2, 3


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


def replay(sub: Subscriber, arrivals: list[tuple[float, Event]], change: Change | None,
           ticks: list[float]) -> Subscriber:
    """Run one subscriber's ordering layer over its arrivals (time, event), change and ticks."""
    items = [(t, ARRIVE, i) for i, (t, _) in enumerate(arrivals)] + [(t, TICK, 0) for t in ticks]
    if change is not None:
        items += [(change.at, START, 0), (change.done, FINISH, 0)]
    for t, kind, i in sorted(items):
        if kind == ARRIVE:
            ev = arrivals[i][1]
            if ev.own & sub.topics:
                sub.receive(ev, t)
        elif kind == TICK:
            if sub.waiting and not sub.buffering:
                sub.flush(t)
        elif kind == START:
            sub.start_subscription(set(change.topics) - sub.topics)
        else:
            sub.finish_subscription(change.ts, t)
    return sub


LOG_SCHEMA = T.StructType([T.StructField("sub", T.LongType(), False),
                           T.StructField("pos", T.LongType(), False),
                           T.StructField("event", T.LongType(), False),
                           T.StructField("at", T.DoubleType(), False),
                           T.StructField("out_of_order", T.BooleanType(), False),
                           T.StructField("arrived", T.DoubleType(), False)])
SUMMARY = -1   # `pos` of each subscriber's summary row: event = events left waiting, at = copies lost


def _task(events: Broadcast, make: Callable[[int], Subscriber], changes: dict, ticks: list[float],
          loss: float, key: int) -> Callable:
    def task(table: pa.Table) -> pa.Table:
        col = {name: table.column(name).to_numpy() for name in ("sub", "eid", "topic", "at")}
        sid = int(col["sub"][0])
        lost = lost_copies(key, loss, col["eid"], col["topic"], col["sub"])
        eid, at = col["eid"][~lost], col["at"][~lost]
        order = np.lexsort((eid, at))                    # by arrival, then event
        eid, at = eid[order], at[order]
        _, first = np.unique(eid, return_index=True)     # dummies come on several topics: the first copy
        first = np.sort(first)
        known, fresh, change = events.value, make(sid), changes.get(sid)
        topics = fresh.topics | (change.topics if change is not None else set())
        arrivals = [(t, known[e].seen_by(topics)) for t, e in zip(at[first].tolist(), eid[first].tolist())]
        sub = replay(fresh, arrivals, change, ticks)
        n = len(sub.log)
        log = list(zip(*sub.log)) if n else [[], [], [], []]
        return pa.table({"sub": pa.array(np.full(n + 1, sid), pa.int64()),
                         "pos": pa.array(np.append(np.arange(n), SUMMARY), pa.int64()),
                         "event": pa.array(list(log[0]) + [len(sub.waiting)], pa.int64()),
                         "at": pa.array(list(log[1]) + [float(lost.sum())], pa.float64()),
                         "out_of_order": pa.array(list(log[2]) + [False], pa.bool_()),
                         "arrived": pa.array(list(log[3]) + [0.0], pa.float64())})
    return task


def replay_frame(deliveries: DataFrame, events: Broadcast, make: Callable[[int], Subscriber], changes: dict,
                 ticks: list[float], loss: float, key: int) -> DataFrame:
    """Replay every subscriber in a grouped task over its deliveries (sub, eid, topic, at).

    `events` broadcasts {eid: Event}; `make(sub)` returns the subscriber's fresh ordering layer.
    Returns LOG_SCHEMA rows: each notification (pos 0.. in the subscriber's order) and one
    summary row per subscriber (pos = SUMMARY). Copies are lost by the simulation's keyed draws.
    """
    return deliveries.groupBy("sub").applyInArrow(_task(events, make, changes, ticks, loss, key), LOG_SCHEMA)

