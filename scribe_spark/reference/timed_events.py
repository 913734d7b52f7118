"""A plain sequential delivery of Scribe events in simulated time, to check `scribe.timed`.

One heap of event copies, processed one at a time in time order. The trees are a `SequentialScribe`'s,
built from every subscription on the nodes' states at the start. Each event starts where and when the
timed Pastry reference delivered its route to the topicId; only the topic's root starts it down the tree.
A copy at node u at time t goes to each child c of u, arriving at t + link(u, c) + proc; it is dropped if
c has gone down at or before that time since the start (a node that went down holds no tree state any
more, even once back), or if it arrives at or after the end of the run.
"""
from __future__ import annotations

import heapq
import math
from typing import Callable

from scribe_spark.reference.sequential_scribe import SequentialScribe

Copy = tuple[int, int, float]   # (event, node, arrival time)


def first_goings(spans: list[tuple[int, float, float, bool]]) -> dict[int, float]:
    """{node: when it first went down within the run} of the (node, down, up, graceful) outages."""
    gone: dict[int, float] = {}
    for v, down, _up, _graceful in spans:
        if down > -math.inf:
            gone[v] = min(gone.get(v, math.inf), down)
    return gone


def deliver(scribe: SequentialScribe, starts: list[tuple[int, int, int, float]],
            link: Callable[[int, int], float], proc: float, gone: dict[int, float],
            until: float) -> list[Copy]:
    """Every copy that reached a node still in its tree, in the order processed.

    `starts` has (event, topic, node, t): where and when each event's route ended. `gone` is
    `first_goings`' map."""
    heap: list[tuple[float, int, int, int, int]] = []   # (t, seq, event, topic, node)
    seq = 0
    for event, topic, node, t in starts:
        if scribe.roots.get(topic) == node:
            heapq.heappush(heap, (t, seq, event, topic, node))
            seq += 1
    reached: list[Copy] = []
    while heap:
        t, _s, event, topic, u = heapq.heappop(heap)
        if t >= until or t >= gone.get(u, math.inf):
            continue
        reached.append((event, u, t))
        for c in sorted(scribe.children.get((topic, u), ())):
            heapq.heappush(heap, (t + link(u, c) + proc, seq, event, topic, c))
            seq += 1
    return reached
