"""A plain-Python model of the leaf-set exchange after a join batch: rules, correctness, supersteps.

    .venv/bin/python bench/leaf_exchange_model.py [--half H ...] [--seeds S]

Written without the library (ring positions and Python sets, no Spark, no ids), to check
`pastry.joins` against an independent account of the same protocol. Old members start with
their true leaf sets among themselves; each newcomer takes the leaf set of the old member
numerically closest to it (and that member), and every node it names takes it in; then
supersteps of the exchange: every node sends itself and its leaf set to each member of its leaf
set while any leaf set changed, and, with `answers`, a node answers a leaf set pushed by a node
it does not count among its members with its own (answers are not answered). Prints, per batch
shape, g (the most newcomers between two consecutive old members), the supersteps, the leaf
sets left wrong and the messages, with and without answers, and the bound 2 ceil(g / h) + 2 of
`joins.exchange_bound`. Sides are split at half the ring, as `failures.leaf_set_layout` does;
newcomers here name only their leaf set (the library's also name their table and neighbours).
"""
from __future__ import annotations

import argparse

import numpy as np

SHAPES = [(3, 60), (5, 100), (10, 150), (20, 200), (50, 150), (100, 100), (150, 50), (8, 40), (30, 300),
          (1, 50), (2, 300)]   # (old members, newcomers)


def layout(me: int, known: set[int], n: int, h: int) -> frozenset[int]:
    """The h nearest known nodes on each side of `me` (all of them when the ring has at most 2h others)."""
    cand = sorted(known - {me})
    if n - 1 <= 2 * h:
        return frozenset(cand)
    right = sorted((c for c in cand if (c - me) % n <= n // 2), key=lambda c: (c - me) % n)[:h]
    left = sorted((c for c in cand if (c - me) % n > n // 2), key=lambda c: (me - c) % n)[:h]
    return frozenset(right) | frozenset(left)


def exchange(old: np.ndarray, ids: np.ndarray, h: int, answers: bool) -> tuple[int, int, int]:
    """Join every non-old node at once; return (supersteps, leaf sets left wrong, messages)."""
    n = len(ids)
    olds = [int(o) for o in old]
    k_old = len(olds)   # old members know their h nearest on each side among themselves (all, if few)
    leaf = {o: frozenset(olds[(i + j) % k_old] for j in range(-h, h + 1)) - {o} for i, o in enumerate(olds)}
    for x in (x for x in range(n) if x not in leaf):
        i = int(np.searchsorted(old, x))
        a, b = olds[(i - 1) % len(olds)], olds[i % len(olds)]
        z = a if (ids[x] - ids[a]) % 1.0 <= (ids[b] - ids[x]) % 1.0 else b   # numerically closest old member
        leaf[x] = layout(x, set(leaf[z]) | {z}, n, h)
    named: dict[int, set[int]] = {}
    for x in range(n):
        if x not in olds:
            for o in leaf[x]:
                named.setdefault(o, set()).add(x)
    for o, xs in named.items():
        leaf[o] = layout(o, set(leaf[o]) | xs, n, h)
    truth = {v: layout(v, set(range(n)), n, h) for v in range(n)}
    msgs = [(u, v, leaf[v] | {v}, True) for v in range(n) for u in leaf[v]]   # (to, from, set, pushed)
    k = sent = 0
    while msgs and k < 10 * n:
        k += 1
        sent += len(msgs)
        inbox: dict[int, list] = {}
        for to, frm, s, pushed in msgs:
            inbox.setdefault(to, []).append((frm, s, pushed))
        new = dict(leaf)
        for u, got in inbox.items():
            new[u] = layout(u, set(leaf[u]).union(*(s for _, s, _ in got)), n, h)
        changed = any(new[u] != leaf[u] for u in inbox)
        answered = [(v, u, new[u] | {u}, False) for u, got in inbox.items() for v, _, pushed in got
                    if answers and pushed and v not in new[u]]
        leaf = new
        pushed_again = [(u, v, leaf[v] | {v}, True) for v in range(n) for u in leaf[v]] if changed else []
        msgs = pushed_again + answered
    return k, sum(leaf[v] != truth[v] for v in range(n)), sent


def longest_gap(old: np.ndarray, n: int) -> int:
    """The most newcomers between two consecutive old members (ring positions)."""
    gaps = np.diff(np.concatenate([old, [old[0] + n]])) - 1
    return int(gaps.max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--half", type=int, nargs="+", default=[1, 2, 4, 8], help="h = |L|/2 values")
    ap.add_argument("--seeds", type=int, default=2)
    a = ap.parse_args()
    print("h,old,newcomers,seed,g,bound,supersteps_push,wrong_push,supersteps_answers,wrong_answers,"
          "messages_push,messages_answers")
    for h in a.half:
        for n_old, n_new in SHAPES:
            for seed in range(a.seeds):
                rng = np.random.default_rng(seed)
                n = n_old + n_new
                ids = np.sort(rng.random(n))              # node v has the v-th smallest id
                old = np.sort(rng.choice(n, n_old, replace=False))
                g = longest_gap(old, n)
                kp, wp, mp = exchange(old, ids, h, answers=False)
                ka, wa, ma = exchange(old, ids, h, answers=True)
                print(f"{h},{n_old},{n_new},{seed},{g},{2 * -(-g // h) + 2},{kp},{wp},{ka},{wa},{mp},{ma}",
                      flush=True)


if __name__ == "__main__":
    main()
