"""Pastry's per-node logic as vectorized numpy kernels over a broadcast `Ring`.

These functions hold no Spark code: Spark calls them inside `mapInArrow` tasks (see
`overlay.py`), and the single-process reference in `bench/` calls them directly.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from scribe_spark import ids
from scribe_spark.topology import Proximity

FLAT_CLASS_MAX = 256        # prefix classes up to this size use the flat pair search
FLAT_PAIRS_PER_CHUNK = 4_000_000
# coordinate models: prefix classes at least this large keep their k-d tree for the process (else
# every batch rebuilt trees over all N nodes for row 0 alone, a cost per batch growing with N);
# smaller ones are not kept, as their trees together would hold N points per row
CACHED_TREE_MIN = 1 << 16

# routing rule that produced a hop (docs/model.md, Pastry): 0 delivered here, 1 leaf set, 2 table, 3 rare case
DELIVERED, LEAF, TABLE, RARE = 0, 1, 2, 3


@dataclass(frozen=True)
class Ring:
    """The overlay's compact, broadcastable part: ids and locations of all nodes.

    Nodes are numbered 0..N-1 (the vertex key `id`); `hi`/`lo` are their 128-bit Pastry
    ids, `order` lists node numbers in ring (ascending id) order and `pos` inverts it.
    """

    hi: np.ndarray
    lo: np.ndarray
    b: int
    leaf_set: int
    neighborhood: int
    prox: Proximity

    def __post_init__(self):
        order = np.lexsort((self.lo, self.hi))
        shi, slo = self.hi[order], self.lo[order]
        ids.require_distinct(shi, slo)
        pos = np.empty_like(order)
        pos[order] = np.arange(len(order))
        self._finish(order=order, pos=pos, shi=shi, slo=slo)

    @classmethod
    def presorted(cls, hi: np.ndarray, lo: np.ndarray, b: int, leaf_set: int, neighborhood: int,
                  prox: Proximity, *, order: np.ndarray, pos: np.ndarray, shi: np.ndarray,
                  slo: np.ndarray) -> Ring:
        """A ring whose order was found elsewhere (sorted in Spark: `workloads/ring_files.py`)."""
        ring = object.__new__(cls)
        for name, value in (("hi", hi), ("lo", lo), ("b", b), ("leaf_set", leaf_set),
                            ("neighborhood", neighborhood), ("prox", prox)):
            object.__setattr__(ring, name, value)
        ring._finish(order=order, pos=pos, shi=shi, slo=slo)
        return ring

    def _finish(self, **ranked: np.ndarray) -> None:
        """Keep the ring order, its inverse and the sorted ids; group a site model's nodes by site."""
        for name, value in ranked.items():
            object.__setattr__(self, name, value)
        if self.prox.site is not None:   # made here, on the driver: shared with the ring, not in every worker
            self.prox.by_site()
            self.prox.site_order(keep=True)
        # identifies this ring in per-worker caches (survives pickling, unlike id())
        object.__setattr__(self, "token", uuid.uuid4().hex)

    @property
    def n(self) -> int:
        return len(self.hi)

    @property
    def digits(self) -> int:
        return ids.ID_BITS // self.b

    @property
    def route_bound(self) -> int:
        """A generous bound on a route's supersteps (a stable overlay needs at most log_2^b N + 1 hops)."""
        return 4 * self.digits + 16


def runs(flags: np.ndarray) -> np.ndarray:
    """Lengths of the runs of True in `flags` read as a ring (a run may wrap from the end to the start)."""
    if not flags.any():
        return np.zeros(0, dtype=np.int64)
    if flags.all():
        return np.array([len(flags)])
    rolled = np.roll(flags, -int(np.argmin(flags)))   # start at a False: no run wraps
    edges = np.diff(np.concatenate([[0], rolled.astype(np.int8), [0]]))
    return np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)


def member_runs(ring: Ring, members: np.ndarray, flagged: np.ndarray) -> np.ndarray:
    """Lengths of the runs of adjacent `members` (ring order) that `flagged`, a mask of all nodes, marks."""
    return runs(flagged[ring.order[np.sort(ring.pos[members])]])


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer: well-mixed 64-bit values from counters (uint64 in, uint64 out)."""
    x = (x + np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


# ---------------------------------------------------------------- node state

def whole_ring(ring: Ring, count: int) -> bool:
    """Whether a ring of `count` (live) nodes is small: each leaf set holds all the others, with no sides.

    True when the others are fewer than L; with exactly L others the leaf set is full, in the L/2 +
    L/2 layout, as on any larger ring.
    """
    return count - 1 < ring.leaf_set


def members_ring(ring: Ring, members: np.ndarray) -> Ring:
    """The ring of the sorted `members` alone, numbered 0..len(members)-1 in that order."""
    members = np.asarray(members, dtype=np.int64)
    if len(members) and not (np.diff(members) > 0).all():
        raise ValueError("members must be sorted and distinct")
    return Ring(ring.hi[members], ring.lo[members], ring.b, ring.leaf_set, ring.neighborhood,
                ring.prox.subset(members))


def member_states(sub: Ring, members: np.ndarray, nodes: np.ndarray, mode: str = "proximity",
                  seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """The converged leaf sets, routing tables and neighbourhood sets of `nodes` (each one of the sorted
    `members`) on the overlay of the members alone (`sub` = `members_ring`), in the whole ring's node
    numbers: the state an overlay converges to when the other nodes are not in it. (`random` mode draws
    from the members' own numbering, so its picks differ from the whole ring's.)"""
    members = np.asarray(members, dtype=np.int64)
    nodes = np.asarray(nodes, dtype=np.int64)
    local = np.searchsorted(members, nodes)
    if len(nodes) and not np.array_equal(members[np.minimum(local, len(members) - 1)], nodes):
        raise ValueError("every node must be one of the members")

    def renumbered(rows: list[np.ndarray]) -> list[np.ndarray]:
        return [np.where(r >= 0, members[np.maximum(r, 0)], -1) for r in rows]
    return (renumbered(leaf_sets(sub, local)), renumbered(routing_tables(sub, local, mode, seed)),
            renumbered(neighborhood_sets(sub, local)))


def leaf_sets(ring: Ring, nodes: np.ndarray) -> list[np.ndarray]:
    """Return each node's leaf set: L/2 smaller then L/2 larger ids, nearest first, wrapping.

    When the ring has fewer than L other nodes the leaf set is all of them (ring order), and the
    routing rule sees it short; with exactly L others it is all of them in this layout, and full.
    """
    if whole_ring(ring, ring.n):
        return list(_around(ring, nodes, np.arange(1, ring.n)))
    return list(leaf_window(ring, nodes))


def leaf_window(ring: Ring, nodes: np.ndarray) -> np.ndarray:
    """Return the nodes' leaf sets, one row each, as `leaf_sets` lays them out on a ring of over L nodes."""
    half = ring.leaf_set // 2
    return _around(ring, nodes, np.concatenate([-np.arange(1, half + 1), np.arange(1, half + 1)]))


def _around(ring: Ring, nodes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Return, for each node, the nodes `offsets` places from it in ring order (wrapping), one row each."""
    return ring.order[(ring.pos[np.asarray(nodes, dtype=np.int64)][:, None] + offsets[None, :]) % ring.n]


def neighborhood_sets(ring: Ring, nodes: np.ndarray) -> list[np.ndarray]:
    """Return each node's neighborhood set: the M nodes closest to it by proximity."""
    m = min(ring.neighborhood, ring.n - 1)
    if m <= 0:
        return [np.empty(0, dtype=np.int64) for _ in nodes]
    prox = ring.prox
    if prox.coords is not None:
        tree = _cached(ring, "nbr_tree", lambda: cKDTree(prox.coords))
        _, j = tree.query(prox.coords[nodes], k=m + 1)
        j = np.asarray(j).reshape(len(nodes), m + 1)
        out = []
        for node, row in zip(nodes, j):
            row = row[row != node]
            out.append(row[:m].astype(np.int64))
        return out
    # site models: nodes grouped by site, sites visited in order of delay from the node's site
    occupied, starts, members = prox.by_site()
    out = [None] * len(nodes)
    qsite = prox.site[nodes]
    by_delay = prox.site_order()
    is_occupied = np.zeros(len(prox.site_delay), dtype=bool)
    is_occupied[occupied] = True
    per_site = np.diff(starts)                  # members of each occupied site
    order = np.argsort(qsite, kind="stable")
    sites, first = np.unique(qsite[order], return_index=True)
    for s, queries in zip(sites.tolist(), np.split(order, first[1:])):
        if by_delay is None:
            near = occupied[np.argsort(prox.site_delay[s, occupied], kind="stable")]
        else:   # the same order: occupied sites by (delay, site)
            row = by_delay[s]
            near = row[is_occupied[row]].astype(np.int64)
        # the nearest sites' members, in that order, as far as the first m + 1 (a node's own set is
        # these without itself: the first m others); growing with N/sites per site, not per node
        k = np.searchsorted(occupied, near[:64])
        if per_site[k].sum() < m + 1:   # sparse sites: look further
            k = np.searchsorted(occupied, near)
        enough = int(np.searchsorted(np.cumsum(per_site[k]), m + 1)) + 1
        cand = np.concatenate([members[starts[j]:starts[j + 1]] for j in k[:enough]])[:m + 1]
        for q in queries.tolist():
            out[q] = cand[cand != nodes[q]][:m].astype(np.int64)
    return out


_CACHE: dict = {}


def _cached(ring: Ring, name: str, make):
    key = (ring.token, name)
    if key not in _CACHE:
        if len(_CACHE) > 16:
            _CACHE.clear()
        _CACHE[key] = make()
    return _CACHE[key]


def _set_digit(hi, lo, r: int, c: int, b: int):
    """Return ids with digit r set to c (ids whose digits from r on are zero)."""
    off = r * b
    if off < 64:
        return hi | np.uint64(c << (64 - b - off)), lo
    return hi, lo | np.uint64(c << (128 - b - off))


def routing_tables(ring: Ring, nodes: np.ndarray, mode: str = "proximity", seed: int = 0) -> list[np.ndarray]:
    """Return each node's routing table as a flat array of rows x 2^b node numbers (-1 empty).

    Entry (r, c) holds a node sharing the first r digits with the node and having digit
    r equal to c. `proximity` picks the candidate closest by the proximity metric;
    `random` picks a uniformly random candidate (seeded). Only rows up to the deepest
    populated one are stored.
    """
    b, cols = ring.b, 1 << ring.b
    nodes = np.asarray(nodes, dtype=np.int64)
    p = ring.pos[nodes]
    n = ring.n
    # deepest row with any entry: the longest prefix shared with a ring-order neighbour
    prev_p = np.maximum(p - 1, 0)
    next_p = np.minimum(p + 1, n - 1)
    with_prev = ids.shared_prefix_digits(ring.shi[p], ring.slo[p], ring.shi[prev_p], ring.slo[prev_p], b)
    with_next = ids.shared_prefix_digits(ring.shi[p], ring.slo[p], ring.shi[next_p], ring.slo[next_p], b)
    sh = np.maximum(np.where(p > 0, with_prev, -1), np.where(p < n - 1, with_next, -1))
    rows = np.minimum(sh + 1, ring.digits)
    tables = [np.full(int(k) * cols, -1, dtype=np.int64) for k in rows]
    for r in range(int(rows.max(initial=0))):
        act = np.flatnonzero(rows > r)
        if len(act) == 0:
            break
        qhi, qlo = ring.shi[p[act]], ring.slo[p[act]]
        fhi, flo = ids.prefix_floor(qhi, qlo, r * b)
        # boundaries of the 2^b child classes: digit r set to c, plus the class end
        bounds = np.empty((len(act), cols + 1), dtype=np.int64)
        for c in range(cols):
            bhi, blo = _set_digit(fhi, flo, r, c, b)
            bounds[:, c] = ids.searchsorted(ring.shi, ring.slo, bhi, blo)
        ehi, elo, over = ids.prefix_end(fhi, flo, r * b)
        bounds[:, cols] = np.where(over, n, ids.searchsorted(ring.shi, ring.slo, ehi, elo))
        own = ids.digit(qhi, qlo, r, b)
        if mode == "random":
            entries = _random_entries(ring, nodes[act], r, bounds, seed)
        else:
            entries = _proximity_entries(ring, nodes[act], r, bounds, own)
        entries[np.arange(len(act)), own] = -1
        for k, i in enumerate(act):
            tables[i][r * cols:(r + 1) * cols] = entries[k]
    return tables


def _random_entries(ring: Ring, nodes, r, bounds, seed) -> np.ndarray:
    cols = bounds.shape[1] - 1
    size = bounds[:, 1:] - bounds[:, :-1]
    key = (nodes.astype(np.uint64)[:, None] * np.uint64(1 << 16) + np.uint64(r * cols)
           + np.arange(cols, dtype=np.uint64)[None, :]) ^ splitmix64(np.full(1, seed, dtype=np.uint64))
    h = splitmix64(key)
    pick = bounds[:, :-1] + (h % np.maximum(size, 1).astype(np.uint64)).astype(np.int64)
    return np.where(size > 0, ring.order[np.minimum(pick, ring.n - 1)], -1)


def _proximity_entries(ring: Ring, nodes, r, bounds, own) -> np.ndarray:
    cols = bounds.shape[1] - 1
    out = np.full((len(nodes), cols), -1, dtype=np.int64)
    start, end = bounds[:, 0], bounds[:, cols]
    big = (end - start) > FLAT_CLASS_MAX
    # large classes: one nearest-candidate search per (parent class, digit)
    if big.any():
        bi = np.flatnonzero(big)
        bi = bi[np.argsort(start[bi], kind="stable")]
        cuts = np.flatnonzero(np.diff(start[bi])) + 1
        # each class's search index, made once per process: site models keep every class's sites,
        # coordinate models only the k-d trees of classes at least CACHED_TREE_MIN large
        indexes = _cached(ring, "class_index", dict)
        index_min = CACHED_TREE_MIN if ring.prox.coords is not None else 2
        for members in np.split(bi, cuts):
            for c in range(cols):
                s, e = bounds[members[0], c], bounds[members[0], c + 1]
                q = members[own[members] != c]
                if e > s and len(q):
                    cand = ring.order[s:e]
                    index = None
                    if e - s >= index_min:
                        index = indexes.get((s, e))
                        if index is None:
                            index = indexes[(s, e)] = ring.prox.search_index(cand)
                    out[q, c] = ring.prox.nearest(nodes[q], cand, index)
    # small classes: all (query, class member) pairs at once, grouped argmin per digit
    small = np.flatnonzero(~big)
    if len(small):
        sizes = end[small] - start[small]
        chunk_starts = _chunks(sizes, FLAT_PAIRS_PER_CHUNK)
        for a, z in zip(chunk_starts[:-1], chunk_starts[1:]):
            q = small[a:z]
            sz = sizes[a:z]
            qi = np.repeat(np.arange(len(q)), sz)
            cand_pos = np.repeat(start[q], sz) + (np.arange(sz.sum()) - np.repeat(np.cumsum(sz) - sz, sz))
            cand = ring.order[cand_pos]
            keep = cand != nodes[q][qi]
            qi, cand_pos, cand = qi[keep], cand_pos[keep], cand[keep]
            if len(qi) == 0:
                continue
            d = ring.prox.dist(nodes[q][qi], cand)
            cd = ids.digit(ring.shi[cand_pos], ring.slo[cand_pos], r, ring.b)
            # pairs run by query, then ring position, so digit r never decreases within a query's
            # run: each (query, digit) group is one run, and its pick is the first pair at the
            # group's least distance (ties: lowest ring position)
            group = np.ones(len(qi), dtype=bool)
            group[1:] = (qi[1:] != qi[:-1]) | (cd[1:] != cd[:-1])
            starts = np.flatnonzero(group)
            gid = np.cumsum(group) - 1
            at_min = np.flatnonzero(d == np.minimum.reduceat(d, starts)[gid])
            pick = at_min[np.r_[True, gid[at_min[1:]] != gid[at_min[:-1]]]]
            out[q[qi[pick]], cd[pick]] = cand[pick]
    return out


def _chunks(sizes: np.ndarray, budget: int) -> np.ndarray:
    """Return start indices splitting `sizes` into consecutive runs of total <= budget."""
    cum = np.cumsum(sizes)
    starts = [0]
    while starts[-1] < len(sizes):
        base = cum[starts[-1] - 1] if starts[-1] > 0 else 0
        nxt = int(np.searchsorted(cum, base + budget, side="right"))
        starts.append(max(nxt, starts[-1] + 1))
    return np.array(starts)


# ---------------------------------------------------------------- routing

def _ragged(values: np.ndarray, offsets: np.ndarray, width: int, fill: np.ndarray) -> np.ndarray:
    """Return a (n, width) matrix of ragged rows, padded with fill[i]."""
    n = len(offsets) - 1
    lens = np.diff(offsets)
    col = np.arange(width)[None, :]
    idx = offsets[:-1, None] + col
    valid = col < lens[:, None]
    out = np.where(valid, values[np.minimum(idx, max(len(values) - 1, 0))] if len(values) else 0,
                   fill[:, None])
    return out.reshape(n, width)


def table_slot(ring: Ring, key_hi, key_lo, at) -> tuple[np.ndarray, np.ndarray]:
    """Return (row, slot) of the routing-table entry node `at` reads for each key.

    row = the digits the key shares with `at`'s id (at most the last row); slot = row x 2^b + the
    key's digit in that row, the entry's index in the flat table.
    """
    at = np.asarray(at, dtype=np.int64)
    shared = ids.shared_prefix_digits(key_hi, key_lo, ring.hi[at], ring.lo[at], ring.b)
    row = np.minimum(shared, ring.digits - 1)
    return row, row * (1 << ring.b) + ids.digit(key_hi, key_lo, row, ring.b)


def leaf_rule(ring: Ring, key_hi, key_lo, at: np.ndarray, leaf: np.ndarray,
              full: np.ndarray | bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Return where node `at`'s leaf set (rows of `leaf`, padded with `at`) takes each key: (in range, node).

    The key is in range when it lies within the leaf set's leftmost and rightmost members (a leaf set
    short of L, not `full`, holds the whole ring: always). There the node is the member or `at`
    numerically closest to the key (`at` itself: the message is delivered there); elsewhere it is `at`.
    """
    L, half = ring.leaf_set, ring.leaf_set // 2
    lm, rm = leaf[:, half - 1], leaf[:, L - 1]
    to_key = ids.sub(key_hi, key_lo, ring.hi[lm], ring.lo[lm])
    span = ids.sub(ring.hi[rm], ring.lo[rm], ring.hi[lm], ring.lo[lm])
    in_range = ~np.asarray(full) | ids.less_equal(*to_key, *span)
    best = at.copy()
    rows = np.flatnonzero(in_range)   # the closest member is searched for only where the rule uses it
    near, khi, klo = at[rows], key_hi[rows], key_lo[rows]
    for j in range(leaf.shape[1]):
        cand = leaf[rows, j]
        better = ids.closer(ring.hi[cand], ring.lo[cand], ring.hi[near], ring.lo[near], khi, klo)
        near = np.where(better, cand, near)
    best[rows] = near
    return in_range, best


def route_step(ring: Ring, key_hi, key_lo, at, leaf_vals, leaf_offs, rt_vals, rt_offs, nbr_vals, nbr_offs,
               entry: np.ndarray | None = None):
    """Apply Pastry's routing rule once at node `at` for each message with key (key_hi, key_lo).

    With `entry`, a message whose value is a node (>= 0) has its routing-table entry at the key's
    slot (`table_slot`) read already, and its rt and nbr rows may be empty: the rule needs them
    only where that entry is empty. Returns (next_node, rule): rule DELIVERED means the message
    ends at `at`.
    """
    L = ring.leaf_set
    at = np.asarray(at, dtype=np.int64)
    leaf = _ragged(leaf_vals, leaf_offs, max(L, 1), at)
    # 1. leaf-set rule: key within [leftmost, rightmost] of the leaf set
    in_range, best = leaf_rule(ring, key_hi, key_lo, at, leaf, np.diff(leaf_offs) >= L)
    nxt = np.where(in_range, best, -1)
    rule = np.where(in_range, np.where(best == at, DELIVERED, LEAF), -1)
    # 2. routing-table rule: entry (l, digit l of key)
    l, idx = table_slot(ring, key_hi, key_lo, at)
    has = idx < np.diff(rt_offs)
    read = np.where(has,
                    rt_vals[np.minimum(rt_offs[:-1] + idx,
                                       max(len(rt_vals) - 1, 0))] if len(rt_vals) else -1, -1)
    entry = read if entry is None else np.where(entry >= 0, entry, read)
    use_rt = (rule < 0) & (entry >= 0)
    nxt = np.where(use_rt, entry, nxt)
    rule = np.where(use_rt, TABLE, rule)
    # 3. rare case: any known node with prefix >= l that is numerically closer to the key
    rare = np.flatnonzero(rule < 0)
    if len(rare):
        k = _rare_cases(ring, np.asarray(key_hi)[rare], np.asarray(key_lo)[rare], at[rare], l[rare],
                        [_rows_of(v, o, rare) for v, o in ((leaf_vals, leaf_offs), (rt_vals, rt_offs),
                                                           (nbr_vals, nbr_offs))])
        nxt[rare], rule[rare] = np.where(k >= 0, k, at[rare]), np.where(k >= 0, RARE, DELIVERED)
    nxt = np.where(rule == DELIVERED, at, nxt)
    return nxt, rule


def route_step_timeouts(ring: Ring, key_hi, key_lo, at, leaf_vals, leaf_offs, rt_vals, rt_offs, nbr_vals,
                        nbr_offs,
                        dead: np.ndarray):
    """Apply the routing rule at `at` when some known nodes have failed without the node knowing.

    A node forwards by the rule; if the chosen node is dead the attempt times out, the node
    forgets that node (a routing-table entry becomes empty, a leaf-set slot takes its nearer
    neighbour's value, a neighborhood entry goes) and applies the rule again, until it
    forwards to a live node or delivers. Returns (next_node, rule, timeouts per message,
    met_index, met_node): each timeout as the message's index and the dead node it met.
    """
    at = np.asarray(at, dtype=np.int64)
    nxt, rule = route_step(ring, key_hi, key_lo, at, leaf_vals, leaf_offs, rt_vals, rt_offs, nbr_vals,
                           nbr_offs)
    timeouts = np.zeros(len(at), dtype=np.int32)
    met_i, met_node = [], []
    todo = np.flatnonzero((rule != DELIVERED) & dead[nxt])
    # the rows still retrying, as their own small ragged state
    state = {int(i): (leaf_vals[leaf_offs[i]:leaf_offs[i + 1]], rt_vals[rt_offs[i]:rt_offs[i + 1]],
                      nbr_vals[nbr_offs[i]:nbr_offs[i + 1]]) for i in todo}
    while len(todo):
        timeouts[todo] += 1
        met_i.append(todo)
        met_node.append(nxt[todo].copy())
        for i in todo:
            leaf, rt, nbr = state[int(i)]
            state[int(i)] = (_forget_leaf(leaf, nxt[i], at[i], ring.leaf_set), np.where(rt == nxt[i], -1, rt),
                             nbr[nbr != nxt[i]])
        parts = [state[int(i)] for i in todo]
        flat = [_concat([p[j] for p in parts]) for j in range(3)]
        n2, r2 = route_step(ring, key_hi[todo], key_lo[todo], at[todo], *flat[0], *flat[1], *flat[2])
        nxt[todo], rule[todo] = n2, r2
        todo = todo[(r2 != DELIVERED) & dead[n2]]
    return nxt, rule, timeouts, _concat(met_i)[0], _concat(met_node)[0]


def _concat(lists: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Return ragged rows as (values, offsets)."""
    offs = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lists], out=offs[1:])
    return (np.concatenate(lists).astype(np.int64) if offs[-1] else np.empty(0, np.int64)), offs


def _forget_leaf(leaf: np.ndarray, bad: int, me: int, L: int) -> np.ndarray:
    """Drop a dead member from a leaf set in the kernels' layout (L/2 smaller then L/2 larger, nearest first).

    A full leaf set keeps its layout: the slot takes the value of the nearer slot on its side
    (or `me`), as leaf-set repair pads a short side, so the range test sees the farthest
    member still believed alive. A small ring's leaf set just loses the member.
    """
    if len(leaf) < L:
        return leaf[leaf != bad]
    out, half = leaf.copy(), L // 2
    for start in (0, half):
        prev = me
        for j in range(start, start + half):
            if out[j] == bad:
                out[j] = prev
            prev = out[j]
    return out


def _rows_of(vals: np.ndarray, offs: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values of some rows of a ragged array, and the place in `rows` of each one's row."""
    lens = offs[rows + 1] - offs[rows]
    first = np.repeat(offs[rows] - (np.cumsum(lens) - lens), lens)
    return vals[first + np.arange(int(lens.sum()))], np.repeat(np.arange(len(rows)), lens)


def _rare_cases(ring: Ring, khi, klo, at: np.ndarray, l: np.ndarray,
                known: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The rare-case rule for many messages at once: per message, among the nodes its node knows
    (`known`: pairs of arrays, the nodes and the message each is known for), those sharing at least
    l digits with the key and numerically closer to it than the node, the closest (ties: the smaller
    id); -1 where there is none."""
    node = np.concatenate([k[0] for k in known]).astype(np.int64)
    msg = np.concatenate([k[1] for k in known])
    keep = node >= 0
    node, msg = node[keep], msg[keep]
    h, lo, qh, ql = ring.hi[node], ring.lo[node], khi[msg], klo[msg]
    ok = (ids.shared_prefix_digits(h, lo, qh, ql, ring.b) >= l[msg]) & \
        ids.closer(h, lo, ring.hi[at[msg]], ring.lo[at[msg]], qh, ql)
    node, msg, h, lo = node[ok], msg[ok], h[ok], lo[ok]
    dhi, dlo = ids.ring_distance(h, lo, khi[msg], klo[msg])
    first = np.lexsort((lo, h, dlo, dhi, msg))   # per message: nearest to the key, then smaller id
    first = first[np.r_[True, msg[first][1:] != msg[first][:-1]]] if len(first) else first
    out = np.full(len(at), -1, dtype=np.int64)
    out[msg[first]] = node[first]
    return out
