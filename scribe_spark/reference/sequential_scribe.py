"""A plain sequential Scribe, message by message, to check the bulk-synchronous trees.

It follows the paper's forward/deliver upcalls literally on a collected copy of the
Pastry state; it is meant for a few hundred subscriptions in tests, not for speed.
"""
from __future__ import annotations

import numpy as np

from scribe_spark.pastry import kernels
from scribe_spark.pastry.kernels import Ring


class SequentialScribe:
    """Scribe state (children tables, parents, subscribers) of every node, updated one message at a time."""

    def __init__(self, ring: Ring, state: dict[int, tuple[list[int], list[int], list[int]]], topics):
        self.ring, self.state, self.topics = ring, state, topics
        self.children: dict[tuple[int, int], set[int]] = {}   # (topic, node) -> children
        self.parent: dict[tuple[int, int], int] = {}
        self.subscribed: set[tuple[int, int]] = set()
        self.roots: dict[int, int] = {}

    def next_hop(self, node: int, topic: int) -> int | None:
        """Return Pastry's next hop from node towards the topicId, or None when node is the root."""
        leaf, rt, nbr = self.state[node]

        def arr(xs) -> tuple[np.ndarray, np.ndarray]:
            return np.asarray(xs, dtype=np.int64), np.array([0, len(xs)], dtype=np.int64)

        nxt, rule = kernels.route_step(self.ring, self.topics.hi[topic:topic + 1],
                                       self.topics.lo[topic:topic + 1],
                                       np.array([node]), *arr(leaf), *arr(rt), *arr(nbr))
        return None if rule[0] == kernels.DELIVERED else int(nxt[0])

    def in_tree(self, topic: int, node: int) -> bool:
        return (topic, node) in self.children or (topic, node) in self.parent or self.roots.get(topic) == node

    def subscribe(self, topic: int, node: int) -> None:
        """Node subscribes: SUBSCRIBE travels towards the root through forward upcalls."""
        already = self.in_tree(topic, node)
        self.subscribed.add((topic, node))
        self.children.setdefault((topic, node), set())
        if not already:
            self.resubscribe(topic, node)

    def unsubscribe(self, topic: int, node: int) -> None:
        """Node leaves; empty non-subscriber forwarders are pruned up the tree."""
        self.subscribed.discard((topic, node))
        self._prune(topic, node)

    def edges(self) -> set[tuple[int, int, int]]:
        """Return the tree edges as (topic, child, parent)."""
        return {(t, c, p) for (t, c), p in self.parent.items()}

    def fail(self, dead: set[int], state: dict[int, tuple[list[int], list[int], list[int]]]) -> None:
        """Nodes in `dead` stop; repair the trees message by message on the repaired Pastry `state`.

        The same protocol as `repair.repair_trees`: dead children expire (and empty forwarders
        unsubscribe), orphans re-subscribe one at a time, a new root drops its own parent.
        """
        self.state = state
        self.subscribed = {(t, n) for t, n in self.subscribed if n not in dead}
        for key in [k for k in self.children if k[1] in dead]:
            del self.children[key]
        for ch in self.children.values():
            ch -= dead
        for key in [k for k in self.parent if k[1] in dead]:
            del self.parent[key]
        for t, n in list(self.parent):
            self._prune(t, n)
        orphans = [(t, c) for (t, c), p in self.parent.items() if p in dead]
        for key in orphans:
            del self.parent[key]
        self.roots = {t: r for t, r in self.roots.items() if r not in dead}
        for t, c in orphans:
            self.resubscribe(t, c)
        for t, r in list(self.roots.items()):
            if (t, r) in self.parent:                 # a forwarder became root: it drops its parent
                p = self.parent.pop((t, r))
                self.children[(t, p)].discard(r)
                self._prune(t, p)

    def resubscribe(self, topic: int, node: int) -> None:
        """Route SUBSCRIBE from node: each forward upcall adds the sender as child and stops at a member.

        Used by a new subscriber and by a tree node whose parent died. Where Pastry delivers
        (deliver upcall) is the root, whether or not that node was in the tree already.
        """
        sender, at = node, self.next_hop(node, topic)
        if at is None:
            self.roots[topic] = node
            return
        while True:
            was_in = self.in_tree(topic, at)
            self.children.setdefault((topic, at), set()).add(sender)
            self.parent[(topic, sender)] = at
            nxt = self.next_hop(at, topic)
            if nxt is None:                 # Pastry delivers here: `at` is the root
                self.roots[topic] = at
                return
            if was_in:
                return
            sender, at = at, nxt

    def _prune(self, topic: int, node: int) -> None:
        while (not self.children.get((topic, node)) and (topic, node) not in self.subscribed
               and (topic, node) in self.parent):
            p = self.parent.pop((topic, node))
            self.children.pop((topic, node), None)
            if (topic, p) in self.children:
                self.children[(topic, p)].discard(node)
            node = p
