"""The multistage TNO sequencer (SPEC section 4): topic managers, counters, timestamp chains.

A timestamp is a dict {topic: counter}. The chain for an event on T starts at TM_T, which
increments LC_T, writes it and writes the values it holds (LLC_T) for lower-ranked topics
of SG_T; it then visits the TMs of the higher-ranked topics of SG_T in rank order, each
writing its current counter without incrementing and updating its LLC from the partial
timestamp. Only ids and timestamps travel; there are no acknowledgements.

Chains are intervals of the precedence order: an event on T visits every TM from T up to
the highest-ranked member of SG_T, and TMs outside SG_T only relay it. With FIFO links this
makes any two chains meet all their common TMs in the same order (their common TMs form one
interval, crossed over the same links), and any three pairwise-overlapping chains share a TM,
so the timestamp order has no cycles. Visiting only SG members (`intervals=False`) lets
chains overtake each other along different paths; the property tests find executions where
the resulting timestamps form a cycle that no subscriber can notify.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class TopicManager:
    """TM_T: the topic's counter LC and the last seen counters LLC of lower-ranked topics."""

    topic: int
    rank: int
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


class Sequencer:
    """All topic managers plus the chains through them; `broken` skips the later stages."""

    def __init__(self, groups: dict[int, set[int]], rank: dict[int, int], broken: bool = False,
                 intervals: bool = True):
        self.rank = rank
        self.groups = groups
        self.broken = broken
        self.intervals = intervals
        self.by_rank = sorted(groups, key=rank.get)
        self.tm = {t: TopicManager(t, rank[t], sorted((u for u in g if rank[u] < rank[t]), key=rank.get))
                   for t, g in groups.items()}

    def _span(self, start: int, members: set[int]) -> list[int]:
        """Return the TMs from `start` up to the highest-ranked of `members`, in rank order."""
        if not self.intervals:
            return sorted(members, key=self.rank.get)
        lo, hi = self.rank[start], max(self.rank[u] for u in members)
        return [t for t in self.by_rank if lo <= self.rank[t] <= hi]

    def chain(self, topic: int) -> list[int]:
        """Return the TMs an event on `topic` visits, in order."""
        if self.broken:
            return [topic]
        higher = {u for u in self.groups[topic] if self.rank[u] >= self.rank[topic]}
        return self._span(topic, higher)

    def subscription_chain(self, topics: set[int]) -> list[int]:
        """Return the TMs a subscription timestamp request visits: its topics and every
        higher-ranked member of their groups (and, with intervals, the TMs in between)."""
        visit = set(topics)
        for t in topics:
            visit |= {u for u in self.groups[t] if self.rank[u] > self.rank[t]}
        return self._span(min(topics, key=self.rank.get), visit)

    def is_work(self, chain: list[int], i: int, own: set[int], subscription: bool) -> bool:
        """True when stage i reads or writes the timestamp; False when the TM only relays it."""
        t = chain[i]
        return i == 0 or (subscription and t in own) or any(t in self.groups[o] for o in own)

    def stage(self, chain: list[int], i: int, own: set[int], ts: dict[int, int], subscription: bool) -> None:
        """Apply stage i of a chain: first stage / subscription slot, a group member, or a relay."""
        t = chain[i]
        if subscription and t in own:
            self.tm[t].stamp_subscription(ts)
        elif not subscription and i == 0:
            self.tm[t].stamp_first(ts)
        elif any(t in self.groups[o] for o in own):
            self.tm[t].stamp_pass(ts)


PRECEDENCE = ("topic_id", "reverse_topic_id", "popular_first", "popular_last")


def precedence_rank(n_topics: int, order: str) -> dict[int, int]:
    """Return each topic's precedence rank: by topic id, or by reverse id. Where topic ids are
    global popularity ranks (0 = most popular), popular_first is by id and popular_last reverse."""
    if order in ("topic_id", "popular_first"):
        return {t: t for t in range(n_topics)}
    return {t: n_topics - 1 - t for t in range(n_topics)}


def chain_profile(seq: Sequencer, server_of: dict, probs: np.ndarray) -> dict:
    """Return the expected chain shape of one event and each TM's expected timestamp stages per event."""
    visits = np.zeros(len(probs))
    tms = work = servers = entries = 0.0
    for topic, p in enumerate(probs):
        chain = seq.chain(topic)
        w = [x for i, x in enumerate(chain) if seq.is_work(chain, i, {topic}, False)]
        visits[w] += p
        tms += p * len(chain)
        work += p * len(w)
        servers += p * len({server_of[x] for x in chain})
        entries += p * len(seq.groups[topic])
    return {"mean_tms_visited": tms, "mean_timestamp_stages": work, "mean_servers_visited": servers,
            "mean_timestamp_entries": entries, "tm_visits": visits}
