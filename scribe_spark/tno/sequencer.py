"""The multistage TNO sequencer (docs/model.md, TNO): topic managers, counters, timestamp chains.

A timestamp is a dict {topic: counter}. The chain for an event on T starts at TM_T, which
increments LC_T, writes it and writes the values it holds (LLC_T) for lower-ranked topics
of SG_T; it then visits the TMs of the higher-ranked topics of SG_T in rank order, each
writing its current counter without incrementing and updating its LLC from the partial
timestamp. Only ids and timestamps travel; there are no acknowledgements.

Which TMs a chain visits (`chains`):

- `etree` (default): the elimination tree of the graph joining T and T' when T' is in SG_T (or
  both are topics of one subscription request, `together`). Topics are eliminated in
  precedence order, lowest rank first; parent(T) is the lowest-ranked of T's higher-ranked
  neighbours, and parent(T) is joined to T's other higher-ranked neighbours. Every
  higher-ranked member of SG_T is then an ancestor of T, and an event on T climbs the tree from
  T to the highest-ranked one; members write their stage, the other TMs only relay. Upward paths
  in a tree meet like intervals on a line, so the argument for intervals carries over.
- `interval`: every TM from T up to the highest-ranked member of SG_T in precedence order.
  With FIFO links any two chains meet all their common TMs in the same order (their common
  TMs form one interval, crossed over the same links), and any three pairwise-overlapping
  chains share a TM, so the timestamp order has no cycles. Longer than `etree` chains where
  groups are sparse.
- `literal`: the members of SG_T only, as the paper's text reads. Chains can overtake each
  other along different paths; the property tests find executions where the timestamps form
  a cycle that no subscriber can notify (events buffered forever).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from scribe_spark.tno.live_groups import LiveGroups


@dataclass
class TopicManager:
    """TM_T: the topic's counter LC and the last seen counters LLC of lower-ranked topics."""

    topic: int
    group_lower: list[int]     # lower-ranked members of SG_T
    lc: int = 0
    llc: dict[int, int] = field(default_factory=dict)

    def stamp_first(self, ts: dict[int, int]) -> None:
        """First stage for an event on this topic: increment and write, add lower-ranked values."""
        self.lc += 1
        ts[self.topic] = self.lc
        for u in self.group_lower:
            ts.setdefault(u, self.llc.get(u, 0))

    def stamp_pass(self, ts: dict[int, int]) -> None:
        """A later stage: write the current counter, learn the lower-ranked values."""
        ts[self.topic] = self.lc
        self._learn(ts)

    def stamp_subscription(self, ts: dict[int, int]) -> None:
        """A subscription request at one of its topics: like a first stage (it takes one slot
        and carries the lower-ranked values), and it learns from what earlier stages wrote."""
        self._learn(ts)
        self.stamp_first(ts)

    def _learn(self, ts: dict[int, int]) -> None:
        for u in self.group_lower:
            if u in ts and ts[u] > self.llc.get(u, 0):
                self.llc[u] = ts[u]


CHAINS = ("etree", "interval", "literal")
RELAY, FIRST, PASS, SLOT = 0, 1, 2, 3      # what a stage does (`Sequencer.action`)


def elimination_tree(groups: dict[int, set[int]], rank: dict[int, int],
                     together: Iterable[set[int]] = ()) -> dict[int, int | None]:
    """Return parent[T] (None at a root) of the elimination tree of the graph T - T' for T' in SG_T
    and for T, T' in one set of `together`, eliminating topics lowest rank first."""
    adj: dict[int, set[int]] = {t: set() for t in groups}
    for t, g in groups.items():
        for u in g:
            if u != t:
                adj[t].add(u)
                adj.setdefault(u, set()).add(t)
    for s in together:
        for u in s:
            adj.setdefault(u, set()).update(v for v in s if v != u)
    parent: dict[int, int | None] = {}
    for t in sorted(adj, key=rank.get):
        higher = [u for u in adj[t] if rank[u] > rank[t]]
        parent[t] = min(higher, key=rank.get) if higher else None
        for u in higher:
            if u != parent[t]:
                adj[parent[t]].add(u)
                adj[u].add(parent[t])
    return parent


class Sequencer:
    """All topic managers plus the chains through them; `broken` skips the later stages."""

    def __init__(self, groups: dict[int, set[int]], rank: dict[int, int], broken: bool = False,
                 chains: str = "etree", together: Iterable[set[int]] = (), live: LiveGroups | None = None):
        """`groups`: every SG_T the run will hold (with `live`, the superset the chains are laid
        over); `together`: the topic sets of subscription requests; `live`: groups that follow the
        subscriptions as each TM records them (None: `groups`, fixed)."""
        if chains not in CHAINS:
            raise ValueError(f"chains must be one of {', '.join(CHAINS)} (got {chains!r})")
        self.rank = rank
        self.groups = groups
        self.live = live
        self.broken = broken
        self.chains = chains
        self.by_rank = sorted(groups, key=rank.get)
        self.parent = elimination_tree(groups, rank, together) if chains == "etree" else {}
        self.tm = {t: TopicManager(t, self._lower(t)) for t in groups}
        self._plans: dict = {}       # topic -> an event's chain and plan (`event_plan`)

    def view(self, topic: int) -> set[int]:
        """SG_T as TM_T knows it now: fixed, or as its recorded subscriptions give it."""
        return self.groups[topic] if self.live is None else self.live.group(topic)

    def _lower(self, topic: int) -> list[int]:
        """The lower-ranked members of SG_T (as TM_T knows it), lowest first."""
        return sorted((u for u in self.view(topic) if self.rank[u] < self.rank[topic]), key=self.rank.get)

    def record(self, tm: int, client: int, subscription: frozenset) -> None:
        """A subscription request reaches TM `tm`: it records the client's whole subscription and, if
        its group changed, writes and chains events by the new group from now on. A request visits
        every topic of the old and the new subscription, lowest rank first, on the chains' own paths:
        events behind it on a link stay behind it, so a TM that starts to write T' (or to climb to
        TM_T') does so only for events the request's timestamp orders after it."""
        if self.live is not None and self.live.record(tm, client, subscription):
            self.tm[tm].group_lower = self._lower(tm)
            self._plans.pop(tm, None)

    def _span(self, start: int, members: set[int]) -> list[int]:
        """Return the TMs from `start` up to the highest-ranked of `members`, in the chain rule's order."""
        if self.chains == "literal":
            return sorted(members, key=self.rank.get)
        top = max(self.rank[u] for u in members)
        if self.chains == "interval":
            return [t for t in self.by_rank if self.rank[start] <= self.rank[t] <= top]
        path = [start]
        while self.rank[path[-1]] < top and self.parent[path[-1]] is not None:
            path.append(self.parent[path[-1]])
        if not members <= set(path):
            raise ValueError(f"topics {sorted(members - set(path))} are not on the elimination-tree path "
                             f"from topic {start}: give the request's topics in `together`")
        return path

    def chain(self, topic: int) -> list[int]:
        """Return the TMs an event on `topic` visits, in order."""
        if self.broken:
            return [topic]
        higher = {u for u in self.view(topic) if self.rank[u] >= self.rank[topic]}
        return self._span(topic, higher)

    def subscription_chain(self, topics: set[int], held: set[int] = frozenset()) -> list[int]:
        """Return the TMs a subscription timestamp request visits: its topics and every higher-ranked
        member of their groups, the topics the client holds already (`held`, with groups that follow
        subscriptions), and the relays between them the chain rule adds."""
        visit = set(topics) | set(held)
        for t in topics:
            visit |= {u for u in self.view(t) if self.rank[u] > self.rank[t]}
        return self._span(min(visit, key=self.rank.get), visit)

    def is_work(self, chain: list[int], i: int, own: set[int], subscription: bool,
                held: set[int] = frozenset()) -> bool:
        """True when stage i reads or writes the timestamp; False when the TM only relays it."""
        return self.action(chain, i, own, subscription, held) != RELAY

    def action(self, chain: list[int], i: int, own: set[int], subscription: bool,
               held: set[int] = frozenset()) -> int:
        """What stage i of a chain does: a subscription's SLOT, an event's FIRST stage, a group
        member's PASS (or a topic the subscribing client holds already), or nothing (RELAY)."""
        t = chain[i]
        if subscription and t in own:
            return SLOT
        if not subscription and i == 0:
            return FIRST
        return PASS if t in held or any(t in self.view(o) for o in own) else RELAY

    def plan(self, chain: list[int], own: set[int], subscription: bool,
             held: set[int] = frozenset()) -> tuple[tuple[bool, int], ...]:
        """(is_work, action) for every stage of a request's chain."""
        actions = (self.action(chain, i, own, subscription, held) for i in range(len(chain)))
        return tuple((a != RELAY, a) for a in actions)

    def event_plan(self, topic: int) -> tuple[tuple[int, ...], tuple[tuple[bool, int], ...]]:
        """The chain of an event on `topic` and its plan: the same for every such event, made once
        (tuples: every event on the topic shares them)."""
        got = self._plans.get(topic)
        if got is None:
            chain = tuple(self.chain(topic))
            got = self._plans[topic] = (chain, self.plan(chain, {topic}, False))
        return got

    def stage(self, tm: int, action: int, ts: dict[int, int]) -> None:
        """Apply one stage's action at TM `tm` to the timestamp being built."""
        if action == SLOT:
            self.tm[tm].stamp_subscription(ts)
        elif action == FIRST:
            self.tm[tm].stamp_first(ts)
        elif action == PASS:
            self.tm[tm].stamp_pass(ts)


PRECEDENCE = ("topic_id", "reverse_topic_id", "popular_first", "popular_last")


def precedence_rank(n_topics: int, order: str) -> dict[int, int]:
    """Return each topic's precedence rank, the highest first in precedence, as the TNO paper orders
    topics: T1 -> T2 -> ... means T1 ranks highest, and a chain climbs towards the highest-ranked
    topic of the group. `topic_id`: topic 1 (id 0 here) ranks highest, so chains move towards lower
    ids and end at the group's lowest id (the paper's Fig. 4: TM_T2 -> TM_T1); `reverse_topic_id` the
    opposite. Where topic ids are global popularity ranks (0 = most popular), `popular_first` (the
    most popular topic first in precedence) is `topic_id` and `popular_last` the reverse."""
    if order in ("topic_id", "popular_first"):
        return {t: n_topics - 1 - t for t in range(n_topics)}
    return {t: t for t in range(n_topics)}


def chain_profile(seq: Sequencer, server_of: dict, probs: np.ndarray) -> dict:
    """Return the expected chain shape of one event, each TM's expected timestamp stages and network
    messages (in and out) per event (`tm_visits`, `tm_messages`), and each server's
    (`server_stages`, `server_messages`)."""
    visits = np.zeros(len(probs))
    tm_messages = np.zeros(len(probs))
    stages_at = np.zeros(max(server_of.values()) + 1)
    messages_at = np.zeros_like(stages_at)
    tms = work = servers = entries = 0.0
    for topic, p in enumerate(probs):
        chain = seq.chain(topic)
        w = [x for i, x in enumerate(chain) if seq.is_work(chain, i, {topic}, False)]
        visits[w] += p
        np.add.at(stages_at, [server_of[x] for x in w], p)
        where = [server_of[x] for x in chain]
        for i, s in enumerate(where):
            crossing = p * ((i == 0 or where[i - 1] != s) + (i + 1 == len(where) or where[i + 1] != s))
            messages_at[s] += crossing
            tm_messages[chain[i]] += crossing
        tms += p * len(chain)
        work += p * len(w)
        servers += p * len(set(where))
        entries += p * len(seq.groups[topic])
    return {"mean_tms_visited": tms, "mean_timestamp_stages": work, "mean_servers_visited": servers,
            "mean_timestamp_entries": entries, "tm_visits": visits, "tm_messages": tm_messages,
            "server_stages": stages_at, "server_messages": messages_at}


@dataclass(frozen=True)
class Saturation:
    """Where the sequencer saturates: the event rate, what saturates first (a TM, which serves one
    message at a time, or a server's cores), and that resource's expected stages and network messages
    per event (a server's per core), whose costs make its load."""

    rate_per_s: float
    bottleneck: str
    stages: float
    messages: float


def saturation(profile: dict, service_ms: float, message_ms: float, cores: int) -> Saturation:
    """The event rate (per s) at which the sequencer saturates, from a `chain_profile` and the costs."""
    tm_load = service_ms * profile["tm_visits"] + message_ms * profile["tm_messages"]
    server_load = (service_ms * profile["server_stages"] + message_ms * profile["server_messages"]) / cores
    tm, server = int(np.argmax(tm_load)), int(np.argmax(server_load))
    if max(tm_load[tm], server_load[server]) <= 0:
        return Saturation(float("inf"), "none (no cost)", 0.0, 0.0)
    if tm_load[tm] >= server_load[server]:
        return Saturation(1000.0 / tm_load[tm], f"TM of topic {tm + 1}", profile["tm_visits"][tm],
                          profile["tm_messages"][tm])
    return Saturation(1000.0 / server_load[server], f"server {server + 1}",
                      profile["server_stages"][server] / cores, profile["server_messages"][server] / cores)
