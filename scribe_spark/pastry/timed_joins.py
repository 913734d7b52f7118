"""Pastry's join in simulated time, in the Spark engine (`timed`): a newcomer's first life.

The protocol is the sequential reference's (`reference.timed_joins`); this module says how the engine
derives it, pass by pass, as it derives everything else (`timed`'s fixed point):

- **Tries.** A newcomer's life that begins by joining (its first, or a later one if no earlier life built
  its state) has tries at its start and every `lookup_timeout_ms` after, while it lives and has no state.
  A pass plans the tries the events it was given show: those that failed (a TRIED event at the newcomer,
  when it tries again), then the next one. A try that fails in this pass adds one the next pass.
- **Contact.** On the driver, per try: the nearest live member not waiting for its own state (the BUILT
  events given say who waits), again `rto_ms` after each contact dead on arrival.
- **Route.** The JOINs are routed as lookups of the newcomers' ids (`timed._route`, with their own lookup
  ids, timeouts and declarations), issued at the contact at the JOIN's arrival. Each node a JOIN reaches
  replies (on arrival, and where it ends after a timeout); the reply's state is the node's version then.
- **Build.** On the driver, per try: the replies as they reach the newcomer; the state is built at the
  arrival of the last one the route needs (a BUILT event holding it), if the newcomer still waits for
  that try then; else a TRIED event at its retry time, if it is alive in that life then.

The newcomer's fold then builds its state from the BUILT event, asks its leaf set to take it in
(rejoins, whose welcomes also take it into the receivers' tables) and tells the nodes of its table
(`join_announce`, a TAKE_IN event at each live receiver, which no longer counts it dead). The ring's states
stay in Spark; the tries, contacts and builds are planned on the driver, and a contact's search reads the
whole ring: the part to move into Spark for runs with many newcomers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from scribe_spark.pastry import kernels
from scribe_spark.pastry.failures import leaf_sides
from scribe_spark.pastry.kernels import Ring

BUILT, TRIED, TAKE_IN = "built", "tried", "take_in"   # event kinds (`timed.EVENT_SCHEMA`)
GIVEN = (BUILT, TRIED)   # what the joins' step derives, given to the next pass's maintenance as they are


@dataclass(frozen=True)
class Try:
    """A newcomer's try to join: from `t`, while it lives (to `life_end`) and waits."""

    x: int
    t: float
    life_end: float


@dataclass(frozen=True)
class Contact:
    """Where a try's JOIN enters the overlay: contact `at`, reached at `t` after `timeouts` dead ones
    (None in `at`: no live contact was reached), and when each JOIN was sent to a contact."""

    at: int | None
    t: float
    timeouts: int
    sends: tuple[float, ...]
    dead: tuple[tuple[int, float], ...]   # (the dead contact, when the newcomer learnt it)


def lives(downs, x: int) -> list[tuple[float, float]]:
    """x's lives as (start, end): from each return to its next going (inf: none)."""
    _place, down, up = downs.of_nodes(np.array([x], np.int64))
    starts = [float(u) for u in up if u < math.inf]
    ends = [float(d) for d in down[1:]] + [math.inf]
    return list(zip(starts, ends[:len(starts)]))


def plan(downs, newcomers: np.ndarray, lookup_timeout: float, until: float,
         given: pd.DataFrame) -> tuple[list[Try], dict[int, list[tuple[float, float]]]]:
    """The tries to route this pass, and each newcomer's waits (start, end) as the events `given` (node,
    kind, t, set_t: BUILT and TRIED) show them."""
    built = {(int(r.node), float(r.set_t)): float(r.t) for r in given.itertuples() if r.kind == BUILT}
    tried = {(int(r.node), float(r.set_t)) for r in given.itertuples() if r.kind == TRIED}
    tries: list[Try] = []
    waits: dict[int, list[tuple[float, float]]] = {}
    for x in newcomers.tolist():
        for start, end in lives(downs, x):
            t, done = start, None
            while t < min(end, until):
                tries.append(Try(x, t, end))
                done = built.get((x, t))
                if done is not None or (x, t) not in tried:
                    break
                t = t + lookup_timeout
            waits.setdefault(x, []).append((start, min(end, done) if done is not None else end))
            if done is not None:
                break   # its later lives are returns with the state it built
    return tries, waits


def waiting(waits: dict[int, list[tuple[float, float]]], t: float) -> set[int]:
    """The newcomers waiting for their own state at t."""
    return {x for x, spans in waits.items() if any(a <= t < b for a, b in spans)}


def contact(ring: Ring, downs, tm, until: float, tr: Try, waits: dict) -> Contact:
    """The try's contact: the nearest live member not waiting, again rto_ms after each one dead on
    arrival, while the newcomer still waits for this try (before its retry, in its life, before the end)."""
    t, timeouts, sends, dead = tr.t, 0, [], []
    others = np.arange(ring.n, dtype=np.int64)
    d = ring.prox.dist(np.full(ring.n, tr.x), others).astype(np.float64)
    while True:
        skip = waiting(waits, t) | {tr.x}
        live = ~downs.is_down(others, np.full(ring.n, t)) & ~np.isin(others, list(skip))
        if not live.any():
            return Contact(None, t, timeouts, tuple(sends), tuple(dead))
        cand = np.flatnonzero(live)
        a = int(cand[np.lexsort((cand, d[cand]))[0]])
        sends.append(t)
        arrive = (t + d[a]) + tm.proc_ms
        if not downs.is_down(np.array([a]), np.array([arrive]))[0]:
            return Contact(a, arrive, timeouts, tuple(sends), tuple(dead))
        t = t + tm.rto_ms
        if not (t < tr.life_end and t < tr.t + tm.lookup_timeout_ms and t < until):
            return Contact(None, t, timeouts, tuple(sends), tuple(dead))
        dead.append((a, t))
        timeouts += 1


def slot_for(ring: Ring, y: int, x: int) -> int | None:
    """The routing-table slot of y that x fits (row: the digits they share; column: x's next digit)."""
    if x == y:
        return None
    return int(kernels.table_slot(ring, ring.hi[[x]], ring.lo[[x]], np.array([y]))[1][0])


def build(ring: Ring, x: int, route: list[tuple[int, list[int], list[int]]]) -> tuple[list[int], list[int],
                                                                                     dict[int, int]]:
    """The newcomer's state from its route's replies (Z_0 = its contact .. Z_k, each (node, leaf set, table)):
    (predecessors, successors, table slots filled): row r from Z_r's row r and Z_r (past k: Z_k's), in each
    slot the candidate nearest by link delay (ties: the lower number); the leaf set from Z_k's and Z_k."""
    cols, k = 1 << ring.b, len(route) - 1
    rows = max([len(table) // cols for _z, _l, table in route] + [k + 1])
    best: dict[int, tuple[float, int]] = {}
    for r in range(rows):
        z, _leaf, table = route[min(r, k)]
        cands = [z] + [e for e in table[r * cols:(r + 1) * cols] if e >= 0]
        dist = ring.prox.dist(np.full(len(cands), x), np.asarray(cands, np.int64)).tolist()
        for c, dc in zip(cands, dist):
            s = slot_for(ring, x, c)
            if s is not None and s // cols == r and (s not in best or (float(dc), c) < best[s]):
                best[s] = (float(dc), c)
    zk, leaf, _table = route[k]
    pred, succ = leaf_sides(ring, x, sorted((set(leaf) | {zk}) - {x}))
    half = ring.leaf_set // 2
    return pred[:half], succ[:half], {s: c for s, (_d, c) in sorted(best.items())}


def settle(ring: Ring, tm, until: float, tr: Try, replies: pd.DataFrame) -> tuple[float, tuple] | None:
    """When and with what state the try builds, from its replies (z, t sent, hops, last, leaf, table) as
    they reach the newcomer while it waits for this try; None if they never complete its route."""
    if not len(replies):
        return None
    z = replies.z.to_numpy(np.int64)
    d = ring.prox.dist(z, np.full(len(z), tr.x)).astype(np.float64)
    arrive = (replies.t.to_numpy(np.float64) + d) + tm.proc_ms
    got: dict[int, tuple] = {}
    for i in np.lexsort((replies.hops.to_numpy(), arrive)).tolist():
        at = float(arrive[i])
        if not (at <= tr.t + tm.lookup_timeout_ms and at < tr.life_end and at < until):
            continue
        row = replies.iloc[i]
        hop, last = int(row["hops"]), bool(row["last"])
        if last or hop not in got:
            got[hop] = (int(row["z"]), last, list(row["leaf"]), list(row["table"]))
        ends = [h for h, g in got.items() if g[1]]
        if ends and all(h in got for h in range(min(ends) + 1)):
            route = [(got[h][0], got[h][2], got[h][3]) for h in range(min(ends) + 1)]
            return at, build(ring, tr.x, route)
    return None
