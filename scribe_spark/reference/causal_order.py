"""The causal order check: an event published by a client after it was notified of e must be notified
after e to every subscriber notified of both.

A direct count over every such (e, e') pair and every subscriber, independent of how the ordering
layer works; TNO alone does not promise it, the causal variant's groups do.
"""
from __future__ import annotations

import numpy as np

MOST_CHECKS = 500_000_000   # (pairs x subscribers) above which the count is not made


def causal_pairs(logs: dict[int, list[tuple[int, float]]],
                 published: dict[int, tuple[int, float]]) -> tuple[np.ndarray, np.ndarray]:
    """(e, e') for every event e' and every e its publisher was notified of before publishing e'.

    `logs[c]` is client c's notifications, (event id, time), in its notification order; `published`
    maps an event id to (publisher, time). Dummy events (negative ids) are never shown, so never count.
    """
    before, after = [], []
    seen = {c: (np.array([e for e, _ in log if e >= 0], dtype=np.int64),
                np.array([t for e, t in log if e >= 0], dtype=np.float64)) for c, log in logs.items()}
    for eid, (client, at) in published.items():
        if eid < 0 or client not in seen:
            continue
        events, times = seen[client]
        deps = events[: np.searchsorted(times, at, side="left")]
        before.append(deps)
        after.append(np.full(len(deps), eid, dtype=np.int64))
    if not before:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(before), np.concatenate(after)


def causal_violations(logs: dict[int, list[tuple[int, float]]],
                      published: dict[int, tuple[int, float]]) -> int | None:
    """Count (subscriber, e, e') notified out of causal order; None where the count is too large to make."""
    first, then = causal_pairs(logs, published)
    if len(first) * max(1, len(logs)) > MOST_CHECKS:
        return None
    top = max([0, *published] + [e for log in logs.values() for e, _ in log]) + 1
    bad = 0
    for log in logs.values():
        pos = np.full(top, -1, dtype=np.int64)
        ids = np.array([e for e, _ in log if e >= 0], dtype=np.int64)
        pos[ids] = np.arange(len(ids))
        a, b = pos[first], pos[then]
        bad += int(((a >= 0) & (b >= 0) & (a > b)).sum())
    return bad
