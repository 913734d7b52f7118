"""Sequencing groups as the topic managers know them while subscriptions change.

With fixed groups the sequencer holds SG_T for every subscription the run will ever have. Here each
TM_T keeps the subscriptions that contain T, as the subscription requests that reach it report them,
and derives SG_T from them: T plus every T' that at least `min_shared` of those subscriptions hold
together with T (2 for TNO, 1 for the causal variant). Only TM_T's own records count, so two TMs
may disagree while a request travels between them; the subscription protocol orders that (see
`Sequencer.record`).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class LiveGroups:
    """Every TM's recorded subscriptions and the group they give."""

    min_shared: int
    subs: dict[int, dict[int, frozenset]] = field(default_factory=dict)   # topic -> client -> topics
    shared: dict[int, Counter] = field(default_factory=dict)              # topic -> topic -> how many

    @classmethod
    def start(cls, subscriptions: dict[int, set[int]], topics, causal: bool) -> LiveGroups:
        """The groups of the subscriptions held at the start, known to every TM."""
        live = cls(1 if causal else 2, {t: {} for t in topics}, {t: Counter() for t in topics})
        for client, held in subscriptions.items():
            for t in held:
                live.record(t, client, frozenset(held))
        return live

    def group(self, topic: int) -> set[int]:
        """SG_T as TM_T knows it now."""
        return {topic} | {u for u, n in self.shared[topic].items() if n >= self.min_shared}

    def record(self, topic: int, client: int, subscription: frozenset) -> bool:
        """TM_T learns the client's whole subscription now; return whether SG_T changed."""
        before = self.group(topic)
        old = self.subs[topic].pop(client, frozenset())
        self.shared[topic].subtract(u for u in old if u != topic)
        if topic in subscription:
            self.subs[topic][client] = subscription
            self.shared[topic].update(u for u in subscription if u != topic)
        return self.group(topic) != before
