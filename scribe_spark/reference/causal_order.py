"""The causal order check: an event published by a client after it was notified of e must be notified
after e to every subscriber notified of both.

A direct count over every such (e, e') pair and every subscriber, independent of how the ordering
layer works; TNO alone does not promise it, the causal variant's groups do.
"""
from __future__ import annotations

import numpy as np

MOST_CHECKS = 500_000_000   # (pairs x subscribers) above which the count is not made


def _seen(logs: dict[int, list[tuple[int, float]]]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Each client's shown events and their times, in its notification order (dummies left out)."""
    return {c: (np.array([e for e, _ in log if e >= 0], dtype=np.int64),
                np.array([t for e, t in log if e >= 0], dtype=np.float64)) for c, log in logs.items()}


def _known(seen: dict[int, tuple[np.ndarray, np.ndarray]],
           published: dict[int, tuple[int, float]]) -> list[tuple[int, np.ndarray]]:
    """(e', the events its publisher was notified of before publishing e'), as views (no copies)."""
    out = []
    for eid, (client, at) in published.items():
        if eid >= 0 and client in seen:
            events, times = seen[client]
            out.append((eid, events[: np.searchsorted(times, at, side="left")]))
    return out


def causal_pairs(logs: dict[int, list[tuple[int, float]]],
                 published: dict[int, tuple[int, float]]) -> tuple[np.ndarray, np.ndarray]:
    """(e, e') for every event e' and every e its publisher was notified of before publishing e'.

    `logs[c]` is client c's notifications, (event id, time), in its notification order; `published`
    maps an event id to (publisher, time). Dummy events (negative ids) are never shown, so never count.
    """
    return _pairs(_known(_seen(logs), published))


def _pairs(known: list[tuple[int, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The (e, e') arrays of `_known`'s lists."""
    if not known:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return (np.concatenate([deps for _, deps in known]),
            np.concatenate([np.full(len(deps), eid, dtype=np.int64) for eid, deps in known]))


def causal_violations(logs: dict[int, list[tuple[int, float]]],
                      published: dict[int, tuple[int, float]]) -> int | None:
    """Count (subscriber, e, e') notified out of causal order; None where the count is too large to make."""
    known = _known(_seen(logs), published)
    if sum(len(deps) for _, deps in known) * max(1, len(logs)) > MOST_CHECKS:
        return None   # counted before the pairs are built: their arrays alone could fill the memory
    first, then = _pairs(known)
    top = max([0, *published] + [e for log in logs.values() for e, _ in log]) + 1
    bad = 0
    for log in logs.values():
        pos = np.full(top, -1, dtype=np.int64)
        ids = np.array([e for e, _ in log if e >= 0], dtype=np.int64)
        pos[ids] = np.arange(len(ids))
        a, b = pos[first], pos[then]
        bad += int(((a >= 0) & (b >= 0) & (a > b)).sum())
    return bad
