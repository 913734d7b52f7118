"""Pastry's join in simulated time, for the sequential reference (`timed_pastry`): a newcomer's first life.

A *newcomer* is a node absent from the start (down since -inf, in no other node's state) whose first
return is a join, not a recovery: it has no state of its own. At its join time t it comes up knowing
no one, and:

1. **Contact.** Its contact A is the member nearest to it by link delay at t (ties: the lower
   number): a live node with a state, not a newcomer still waiting for its own. It sends A a JOIN
   (kind `join`); if A is dead on arrival, it learns so `rto_ms` later and tries the next nearest.
2. **Route.** The JOIN is routed from A to the newcomer's id as a lookup is, hop by hop on the state
   of each node at the time the JOIN is there (a forwarder that sends it to a node dead on arrival
   learns it `rto_ms` later, declares that node failed, repairs the table entry as after a lookup's
   timeout, and routes again; a JOIN is lost as a lookup is). Each node Z_i the JOIN reaches (i = 0
   for A, counting hops) sends the newcomer its leaf set, routing table and neighbourhood set as they
   are at the JOIN's arrival (kind `join_reply`); the node where the JOIN ends, Z_k, marks its reply
   the last (it names k). A newcomer without its state `lookup_timeout_ms` after sending a JOIN tries
   again from step 1, ignoring the replies to earlier tries.
3. **State.** Once the newcomer has the replies of Z_0..Z_k it builds its state, at the arrival of the
   last of them: routing-table row r from Z_r's row r (rows past k from Z_k's), Z_r itself a candidate
   too, keeping in each slot the candidate valid for it (sharing r digits with it, digit r the slot's)
   nearest by link delay (ties: the lower number); its leaf set, the L/2 nearest of each side among
   Z_k's leaf set and Z_k. Replies after that are ignored. Its neighbourhood set stays empty, and no
   node adds it to its own: in simulated time only the rare case of the routing rule reads those sets,
   and the join builds none.
4. **Announce.** It then asks every member of its leaf set to take it in, as a returning node does
   (kind `rejoin`, with its timer; the reply, `rejoin_reply`, holds the member's leaf set, which it
   merges), and sends every other node its table names a notice (kind `join_announce`). A live
   leaf-set member *welcomes* it as a returning node's (no longer dead to it; into its leaf set if
   among the L/2 nearest of its side); a live receiver of either puts it into its routing-table slot
   for it if that slot is empty or it is nearer by link delay than the entry there (a table too short
   for that row grows); a receiver that knew it dead (it held it in a state from before the newcomer
   joined) no longer does, as after a welcome. From then on the newcomer behaves as a node back
   up: after each leaf-set merge it announces itself (kind `announce`) to the members it has not told
   yet. The leaf sets' replies are what lets two newcomers that join at once between the same members
   learn of each other.

It ticks from its first keep-alive tick at or after its join, as a returning node does. Lookups it
issues before its state is built see an empty state and end at it. A newcomer that goes down before
its state is built joins again when it comes back.
"""
from __future__ import annotations

import math

import numpy as np

from scribe_spark import ids

Try = tuple[int, int, float]   # a newcomer's try to join: the life it tries in, its number, when it began


class Joins:
    """The join's handlers, mixed into `TimedPastry` (they read its state, clock and message helpers)."""

    def _join(self, t: float, x: int) -> None:
        """Newcomer x comes up with no state and sends a JOIN to its contact."""
        self.alive[x] = True
        self.inc[x] += 1
        self.join_life[x] = int(self.inc[x])
        node = self.nodes[x]
        node.pred, node.succ, node.rt, node.nbr = [], [], [], []
        node.known_dead.clear()
        node.asked.clear()
        node.told = set()
        k = max(0, math.ceil((t - float(self.phase[x])) / self.params.keepalive_ms))
        self._schedule_tick(x, k)
        self.join_log.append((x, t))
        self._try_join(t, x, 1)

    def _try_join(self, t: float, x: int, n: int) -> None:
        """x's n-th try: a JOIN to its contact, and a timer to try again if it has no state by the lookup
        timeout (the JOIN may be lost, or a forwarder may die holding it)."""
        self.join_replies[x] = {}
        self.join_tries[x] = n
        j = (int(self.inc[x]), n, t)   # every JOIN and reply of the try carries it
        self._at_timer(t + self.params.lookup_timeout_ms, self._join_again, x, j)
        self._contact(t, x, 0, j)

    def _join_again(self, t: float, x: int, j: Try) -> None:
        """No state yet from try j: x tries again."""
        if self._waiting(x, j):
            self.join_lost.append((x, t))
            self._try_join(t, x, j[1] + 1)

    def _waiting(self, x: int, j: Try) -> bool:
        """Whether x, alive in the life of try j, still waits for the replies of that very try."""
        return self._live(x, j[0]) and x in self.join_replies and self.join_tries[x] == j[1]

    def _contact(self, t: float, x: int, timeouts: int, j: Try) -> None:
        """x sends its JOIN to the member nearest to it: a live node with a state (not a newcomer still
        waiting for its own)."""
        live = [int(v) for v in np.flatnonzero(self.alive) if v != x and v not in self.join_replies]
        if not live:
            return   # no member to ask: its timer tries again
        a = min(live, key=lambda v: (float(self.link(x, v)), v))
        self.messages["join"] += 1
        self.sent_at["join"].append(t)
        self._join_hop(t, x, x, a, -1, timeouts, j)

    def _join_hop(self, t: float, x: int, u: int, v: int, hops: int, timeouts: int,
                  j: Try) -> None:
        """The JOIN goes from u, `hops` hops along its route (-1: the newcomer), to v (counted by its
        sender): it arrives a hop further, or u learns v is dead rto_ms on."""
        arrive = self._arrival(u, v, t)
        if self._down_at(v, arrive):   # the timer is u's, of its life now
            self._at_timer(t + self.params.rto_ms, self._join_timeout, x, u, v, hops, timeouts, j,
                           int(self.inc[u]))
        else:
            self._at_arrival(arrive, self._on_join, x, v, hops + 1, timeouts, j)

    def _on_join(self, t: float, x: int, z: int, hops: int, timeouts: int, j: Try) -> None:
        """The JOIN reaches z: z replies with its state, then routes the JOIN on (or it ends at z)."""
        if not self.alive[z]:
            return   # never happens: a send to a node dead on arrival takes the timeout path
        self._join_step(t, x, z, hops, timeouts, j, reply=True)

    def _join_step(self, t: float, x: int, z: int, hops: int, timeouts: int, j: Try,
                   reply: bool) -> None:
        """At live z: lost past its limits; else the next hop by the routing rule, or the end here."""
        if t > j[2] + self.params.lookup_timeout_ms or hops + timeouts >= self.max_attempts:
            return   # lost: the newcomer's timer tries again
        node = self.nodes[z]
        nxt = self._rule(z, int(self.ring.hi[x]), int(self.ring.lo[x]))
        last = nxt is None
        if reply or last:   # after a timeout only if it ends here: the reply on arrival said it went on
            state = (list(node.pred), list(node.succ), list(node.rt), list(node.nbr))
            self._send("join_reply", z, x, t, self._on_join_reply, x, z, hops, last, state, j)
        if not last:
            self.messages["join"] += 1
            self.sent_at["join"].append(t)
            self._join_hop(t, x, z, nxt, hops, timeouts, j)

    def _join_timeout(self, t: float, x: int, u: int, v: int, hops: int, timeouts: int, j: Try,
                      inc_u: int) -> None:
        """u learns the node it sent the JOIN to is dead: declares it (the newcomer its contact: nothing
        to forget) and routes again; a newcomer whose contact died picks another. Lost if u went down
        meanwhile (even if back by then), as a lookup is."""
        self.join_timeouts.append((x, u, v, t))
        if u == x:
            if self._waiting(x, j):
                self._contact(t, x, timeouts + 1, j)
            return
        if not self._live(u, inc_u):
            return   # lost: the newcomer's timer tries again
        if not self._heard(u, v, t - self.params.rto_ms):
            self.declare_failed(u, v, t, by_lookup=self.params.table_repair)
        self._join_step(t, x, u, hops, timeouts + 1, j, reply=False)

    def _on_join_reply(self, t: float, x: int, z: int, hops: int, last: bool, state: tuple,
                       j: Try) -> None:
        """A newcomer waiting for try j keeps the reply; with every reply of the route in, it builds its
        state."""
        if not self._waiting(x, j):
            return
        got = self.join_replies[x]
        if last or hops not in got:
            got[hops] = (z, last, state)
        ends = [h for h, (_z, end, _s) in got.items() if end]
        if ends and all(h in got for h in range(min(ends) + 1)):
            route = [got[h] for h in range(min(ends) + 1)]
            del self.join_replies[x]
            self._build(t, x, [(zz, s) for zz, _e, s in route])

    def _build(self, t: float, x: int, route: list[tuple[int, tuple]]) -> None:
        """The newcomer's state from its route's replies (Z_0 = its contact ... Z_k), then its notices."""
        node, cols, k = self.nodes[x], 1 << self.ring.b, len(route) - 1
        rows = max([len(s[2]) // cols for _z, s in route] + [k + 1])
        rt = [-1] * (rows * cols)
        for r in range(rows):
            z, (_p, _s, zrt, _n) = route[min(r, k)]
            for c in [z] + [e for e in zrt[r * cols:(r + 1) * cols] if e >= 0]:
                slot = self._slot_for(x, c)
                if slot is not None and slot // cols == r and (rt[slot] < 0 or self._nearer(x, c, rt[slot])):
                    rt[slot] = c
        while rt and all(e < 0 for e in rt[-cols:]):
            rt = rt[:-cols]
        zk, (pred, succ, _rt, _n) = route[k]
        node.rt = rt
        node.pred, node.succ = self.nearest_sides(x, (set(pred) | set(succ) | {zk}) - {x})
        self.join_built.append((x, t))
        leaf = node.leaf
        node.told.update(leaf)
        for m in leaf:   # as a returning node: each takes it in and replies with its leaf set
            self._request_leaf(x, m, t, rejoin=True)
        for c in dict.fromkeys(e for e in node.rt if e >= 0):
            if c not in node.told:
                node.told.add(c)
                self._send("join_announce", x, c, t, self._on_join_announce, c, x)

    def is_new(self, x: int) -> bool:
        """Whether x lives a life it began by joining (it has not gone down since)."""
        return self.join_life.get(x) == int(self.inc[x])

    def _nearer(self, x: int, c: int, e: int) -> bool:
        """Whether c is nearer to x than e by link delay (ties: the lower number)."""
        return (float(self.link(x, c)), c) < (float(self.link(x, e)), e)

    def _slot_for(self, y: int, x: int) -> int | None:
        """The routing-table slot of y that x fits (row: the digits they share, column: x's next digit)."""
        if x == y:
            return None
        hi, lo, b = self.ring.hi, self.ring.lo, self.ring.b
        r = int(ids.shared_prefix_digits(hi[[y]], lo[[y]], hi[[x]], lo[[x]], b)[0])
        if r >= self.ring.digits:
            return None
        return r * (1 << b) + int(ids.digit(hi[[x]], lo[[x]], r, b)[0])

    def _on_join_announce(self, t: float, y: int, x: int) -> None:
        """A live y learns newcomer x is alive (no longer dead to it, as a welcome) and takes it into its
        routing table where it fits (not into its leaf set: y is no member of x's, and a side of y's short
        of a member would take x in from however far off)."""
        if self.alive[y]:
            self.hear(y, x, t)
            self.take_in(y, x)

    def take_in(self, y: int, x: int) -> None:
        """y puts newcomer x into its routing-table slot for it (empty, or x nearer)."""
        node, cols = self.nodes[y], 1 << self.ring.b
        slot = self._slot_for(y, x)
        if slot is not None:
            if slot >= len(node.rt):
                node.rt = node.rt + [-1] * ((slot // cols + 1) * cols - len(node.rt))
            e = node.rt[slot]
            if e < 0 or self._nearer(y, x, e):
                node.rt[slot] = x

