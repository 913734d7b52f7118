"""The multistage TNO sequencer (SPEC section 4): topic managers, counters, timestamp chains.

A timestamp is a dict {topic: counter}. The chain for an event on T starts at TM_T, which
increments LC_T, writes it and writes the values it holds (LLC_T) for lower-ranked topics
of SG_T; it then visits the TMs of the higher-ranked topics of SG_T in rank order, each
writing its current counter without incrementing and updating its LLC from the partial
timestamp. Only ids and timestamps travel; there are no acknowledgements.
"""
from __future__ import annotations

from dataclasses import dataclass, field


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

    def __init__(self, groups: dict[int, set[int]], rank: dict[int, int], broken: bool = False):
        self.rank = rank
        self.groups = groups
        self.broken = broken
        self.tm = {t: TopicManager(t, rank[t], sorted((u for u in g if rank[u] < rank[t]), key=rank.get))
                   for t, g in groups.items()}

    def chain(self, topic: int) -> list[int]:
        """Return the TMs an event on `topic` visits, in order."""
        higher = sorted((u for u in self.groups[topic] if self.rank[u] > self.rank[topic]), key=self.rank.get)
        return [topic] if self.broken else [topic] + higher

    def subscription_chain(self, topics: set[int]) -> list[int]:
        """Return the TMs a subscription timestamp request visits: its topics and every
        higher-ranked member of their groups, by rank (so its dummy is ordered like an event)."""
        visit = set(topics)
        for t in topics:
            visit |= {u for u in self.groups[t] if self.rank[u] > self.rank[t]}
        return sorted(visit, key=self.rank.get)

    def stamp(self, topic: int) -> dict[int, int]:
        """Run a whole event chain at once (when the TMs' message timing does not matter)."""
        ts: dict[int, int] = {}
        for i, t in enumerate(self.chain(topic)):
            (self.tm[t].stamp_first if i == 0 else self.tm[t].stamp_pass)(ts)
        return ts
