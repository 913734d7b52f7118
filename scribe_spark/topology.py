"""Proximity models (docs/model.md, networks): where nodes sit and how far apart they are.

A `Proximity` answers two vectorized questions the overlay needs: the distance between
node pairs, and, for a set of query nodes, the closest member of a candidate set. It is
compact (coordinates, or a site index per node plus a site-by-site delay matrix) so it
can be broadcast to Spark executors.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components, shortest_path
from scipy.spatial import cKDTree

MODELS = ("plane", "sphere", "transit-stub", "matrix")
PLANE_SIZE = 1000.0
LAN_DELAY_MS = 1.0


@dataclass(frozen=True)
class TransitStub:
    """A Georgia-Tech-style transit-stub router graph and its all-pairs delays."""

    n_routers: int
    is_transit: np.ndarray      # (R,) bool
    edges: np.ndarray           # (E, 2) int32, undirected, each once
    edge_delay: np.ndarray      # (E,) float32 ms
    delay: np.ndarray           # (R, R) float32 ms, shortest paths
    pred: np.ndarray            # (R, R) int32: pred[a, v] = router before v on the shortest path a -> v

    def link_index(self):
        """Return a sparse (R, R) matrix holding 1 + link number for both directions of each link."""
        e = self.edges
        data = np.arange(1, len(e) + 1, dtype=np.int64)
        return coo_matrix((np.concatenate([data, data]), (np.concatenate([e[:, 0], e[:, 1]]),
                                                           np.concatenate([e[:, 1], e[:, 0]]))),
                          shape=(self.n_routers, self.n_routers)).tocsr()


@dataclass(frozen=True)
class Proximity:
    """Node locations under one model; distances in the model's unit (plane units, radians, ms)."""

    model: str
    coords: np.ndarray | None = None     # (N, 2) plane, (N, 3) unit vectors on the sphere
    site: np.ndarray | None = None       # (N,) site (router / matrix row) of each node
    site_delay: np.ndarray | None = None  # (S, S) float32
    lan: float = 0.0                     # added once per endpoint for site models

    @property
    def n(self) -> int:
        return len(self.coords) if self.coords is not None else len(self.site)

    def placement(self, site_name: str = "site") -> dict[str, np.ndarray]:
        """Where each node sits, as output columns: x, y (and z) for coordinates, else its site."""
        if self.coords is not None:
            return {axis: self.coords[:, i] for i, axis in enumerate("xyz"[:self.coords.shape[1]])}
        return {site_name: self.site}

    def subset(self, nodes: np.ndarray) -> "Proximity":
        """The locations of `nodes` alone, numbered 0..len(nodes)-1 in that order (the same model)."""
        nodes = np.asarray(nodes, dtype=np.int64)
        return replace(self, coords=None if self.coords is None else self.coords[nodes],
                       site=None if self.site is None else self.site[nodes])

    def dist(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Return the distance between nodes a[i] and b[i] (0 where a[i] == b[i])."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        if self.coords is not None:
            d = np.linalg.norm(self.coords[a] - self.coords[b], axis=-1)
            if self.model == "sphere":
                d = 2.0 * np.arcsin(np.clip(d / 2.0, 0.0, 1.0))
            return d
        d = self.site_delay[self.site[a], self.site[b]].astype(np.float64) + 2.0 * self.lan
        return np.where(a == b, 0.0, d)

    def search_index(self, candidates: np.ndarray) -> cKDTree | tuple[np.ndarray, np.ndarray]:
        """Return `candidates` prepared for many `nearest` searches: a k-d tree, or their sites."""
        candidates = np.asarray(candidates, dtype=np.int64)
        if self.coords is not None:
            return cKDTree(self.coords[candidates])
        sites, first = self.candidate_sites(candidates)
        return sites.astype(np.int32), first.astype(np.int32)

    def nearest(self, queries: np.ndarray, candidates: np.ndarray,
                index: cKDTree | tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Return, for each query node, the candidate node closest to it.

        Ties are broken deterministically (coordinate models: first in `candidates`;
        site models: lowest site, then first in `candidates`). A query is never its own
        answer unless it is the only candidate. For candidates searched many times, `index`
        may pass `search_index(candidates)`, made once.
        """
        queries = np.asarray(queries, dtype=np.int64)
        candidates = np.asarray(candidates, dtype=np.int64)
        if len(candidates) == 1 or len(queries) == 0:
            return np.full(len(queries), candidates[0] if len(candidates) else -1, dtype=np.int64)
        if self.coords is not None:
            if len(candidates) * len(queries) <= 20_000:
                return _nearest_brute(self, queries, candidates)
            tree = self.search_index(candidates) if index is None else index
            _, j = tree.query(self.coords[queries], k=2)
            first = candidates[j[:, 0]]
            return np.where(first == queries, candidates[j[:, 1]], first)
        # site model: reduce candidates to one per site (the first), then the closest candidate
        # site per query site (ties: lowest site)
        csites, first_idx = self.search_index(candidates) if index is None else index
        qsites, qinv = np.unique(self.site[queries], return_inverse=True)
        ans = candidates[first_idx[self.closest_sites(qsites, csites)]][qinv]
        clash = ans == queries
        if clash.any():  # a query whose best site holds only itself: search without it
            for i in np.flatnonzero(clash):
                others = candidates[candidates != queries[i]]
                ans[i] = others[np.argmin(self.dist(np.full(len(others), queries[i]), others))] \
                    if len(others) else queries[i]
        return ans


    def by_site(self, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Site models: (occupied sites, ascending; where each one's nodes start in `members`, and the
        end; members: node numbers by site, then number, int32), made once per object, in `out` if given
        (a file the ring maps).

        The ring makes it on the driver, so that the Python workers map it with the ring's other arrays
        (`spark/shared.py`), one copy per machine, instead of each sorting all N nodes itself.
        """
        if "_by_site_members" not in self.__dict__:
            members = np.empty(len(self.site), np.int32) if out is None else out
            occupied, starts = group_by_site(self.site, len(self.site_delay), members)
            # arrays of their own attributes, so that the share maps each one
            object.__setattr__(self, "_by_site_occupied", occupied)
            object.__setattr__(self, "_by_site_starts", starts)
            object.__setattr__(self, "_by_site_members", members)
        return self._by_site_occupied, self._by_site_starts, self._by_site_members

    def site_order(self, keep: bool = False) -> np.ndarray | None:
        """`sites_by_delay` of the site delays; with `keep`, made now and kept with the object, so that
        the ring, which keeps it on the driver, ships it to the Python workers mapped, one copy per
        machine, instead of each worker sorting the sites^2 delays itself."""
        if "_site_order" in self.__dict__:
            return self._site_order
        order = sites_by_delay(self.site_delay)
        if keep and order is not None:
            object.__setattr__(self, "_site_order", order)
        return order

    def candidate_sites(self, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return the sites holding candidates (sorted) and the index of each one's first candidate."""
        return np.unique(self.site[candidates], return_index=True)

    def closest_sites(self, qsites: np.ndarray, csites: np.ndarray) -> np.ndarray:
        """Return, per query site, the index in `csites` (sorted) of the closest one (ties: lowest site)."""
        order = self.site_order()
        if order is None or len(csites) ** 2 < len(self.site_delay):
            return _closest_sites_dense(self.site_delay, qsites, csites)
        present = np.zeros(len(self.site_delay), dtype=bool)
        present[csites] = True
        best = np.full(len(qsites), -1, dtype=np.int64)
        left = np.arange(len(qsites))
        j, w = 0, 8
        while len(left):    # walk each query site's list in lockstep until a candidate site turns up
            block = order[qsites[left], j:j + w]
            hit = present[block]
            found = hit.any(axis=1)
            best[left[found]] = block[found, hit[found].argmax(axis=1)]
            left = left[~found]
            j, w = j + w, 2 * w
        return np.searchsorted(csites, best)


def group_by_site(site: np.ndarray, sites: int, out: np.ndarray,
                  chunk: int = 1 << 20) -> tuple[np.ndarray, np.ndarray]:
    """Write node numbers grouped by site (by site, then number) into `out`, a chunk of nodes at a time,
    so that no N-sized scratch is made; return the occupied sites (int32) and where each one's nodes
    start in `out`, and the end."""
    counts = np.zeros(sites, np.int64)
    for c in range(0, len(site), chunk):
        counts += np.bincount(site[c:c + chunk], minlength=sites)
    cursor = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for c in range(0, len(site), chunk):
        here = np.asarray(site[c:c + chunk])
        order = np.argsort(here, kind="stable")
        grouped = here[order]
        count = np.bincount(here, minlength=sites)
        first = np.concatenate([[0], np.cumsum(count)[:-1]])    # where each site starts in this chunk
        out[cursor[grouped] + np.arange(len(here)) - first[grouped]] = c + order
        cursor += count
    occupied = np.flatnonzero(counts)
    return occupied.astype(np.int32), np.concatenate([[0], np.cumsum(counts[occupied])])


SITE_ORDER_MAX_SITES = 10_000   # above this the per-site lists (sites^2 entries) cost too much memory
SITE_ORDER_ROWS = 256           # rows of the site delays sorted at once
_SITE_ORDER: dict[int, np.ndarray] = {}


def sites_by_delay(site_delay: np.ndarray) -> np.ndarray | None:
    """Return, per site, every site sorted by (delay from it, site); computed once per process and matrix."""
    if len(site_delay) > SITE_ORDER_MAX_SITES:
        return None
    key = id(site_delay)
    if key not in _SITE_ORDER:
        order = np.empty(site_delay.shape, np.int16 if len(site_delay) < (1 << 15) else np.int32)
        for i in range(0, len(order), SITE_ORDER_ROWS):   # in blocks: argsort's int64 rows are 4x larger
            rows = slice(i, i + SITE_ORDER_ROWS)
            order[rows] = np.argsort(site_delay[rows], axis=1, kind="stable")
        _SITE_ORDER[key] = order
        weakref.finalize(site_delay, _SITE_ORDER.pop, key, None)
    return _SITE_ORDER[key]


def _closest_sites_dense(site_delay: np.ndarray, qsites: np.ndarray, csites: np.ndarray) -> np.ndarray:
    """Argmin over the dense [query sites x candidate sites] delay block, in slices."""
    best = np.empty(len(qsites), dtype=np.int64)
    step = max(1, 20_000_000 // max(1, len(csites)))
    for s in range(0, len(qsites), step):
        best[s:s + step] = np.argmin(site_delay[qsites[s:s + step]][:, csites], axis=1)
    return best


def _nearest_brute(p: Proximity, queries: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    d = p.dist(np.repeat(queries, len(candidates)), np.tile(candidates, len(queries)))
    d = d.reshape(len(queries), len(candidates))
    d[queries[:, None] == candidates[None, :]] = np.inf
    return candidates[np.argmin(d, axis=1)]


def plane(n: int, rng: np.random.Generator) -> Proximity:
    """Return n nodes at uniform random points of [0, 1000]^2 (Euclidean distance)."""
    return Proximity("plane", coords=rng.uniform(0.0, PLANE_SIZE, size=(n, 2)))


def sphere(n: int, rng: np.random.Generator) -> Proximity:
    """Return n nodes uniform on the unit sphere (great-circle distance in radians)."""
    v = rng.normal(size=(n, 3))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return Proximity("sphere", coords=v)


def _random_connected_graph(k: int, p_extra: float, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Return edges of a random connected graph on k vertices: a random tree plus extra edges."""
    if k <= 1:
        return []
    order = rng.permutation(k)
    edges = set()
    for i in range(1, k):
        j = int(order[rng.integers(0, i)])
        a, b = int(order[i]), j
        edges.add((min(a, b), max(a, b)))
    iu, ju = np.triu_indices(k, 1)
    extra = rng.random(len(iu)) < p_extra
    edges.update(zip(iu[extra].tolist(), ju[extra].tolist()))
    return sorted(edges)


def transit_stub(rng: np.random.Generator, *, transit_domains: int = 10, routers_per_transit: int = 5,
                 stubs_per_transit_router: int = 10, routers_per_stub: int = 10,
                 edge_prob: float = 0.3, delay_transit_transit: float = 20.0,
                 delay_inter_transit: float = 50.0, delay_transit_stub: float = 5.0,
                 delay_stub_stub: float = 2.0) -> TransitStub:
    """Return a transit-stub router graph (default 5,050 routers) with shortest-path delays."""
    src, dst, dl = [], [], []
    is_transit = []

    def add_domain(k: int, transit: bool, delay: float) -> int:
        base = len(is_transit)
        is_transit.extend([transit] * k)
        for a, b in _random_connected_graph(k, edge_prob, rng):
            src.append(base + a)
            dst.append(base + b)
            dl.append(delay)
        return base

    transit_base = [add_domain(routers_per_transit, True, delay_transit_transit)
                    for _ in range(transit_domains)]
    # transit domains connected as a random connected graph, one link between random routers
    for a, b in _random_connected_graph(transit_domains, edge_prob, rng):
        src.append(transit_base[a] + int(rng.integers(routers_per_transit)))
        dst.append(transit_base[b] + int(rng.integers(routers_per_transit)))
        dl.append(delay_inter_transit)
    for t in range(transit_domains):
        for r in range(routers_per_transit):
            tr = transit_base[t] + r
            for _ in range(stubs_per_transit_router):
                base = add_domain(routers_per_stub, False, delay_stub_stub)
                src.append(tr)
                dst.append(base + int(rng.integers(routers_per_stub)))
                dl.append(delay_transit_stub)
    n = len(is_transit)
    edges = np.array([src, dst], dtype=np.int32).T
    delays = np.array(dl, dtype=np.float32)
    graph = coo_matrix((delays, (edges[:, 0], edges[:, 1])), shape=(n, n)).tocsr()
    ncomp, _ = connected_components(graph, directed=False)
    if ncomp != 1:   # _random_connected_graph connects every domain; this would be a bug
        raise RuntimeError(f"transit-stub generator produced a disconnected graph ({ncomp} components)")
    delay, pred = shortest_path(graph, method="D", directed=False, return_predecessors=True)
    return TransitStub(n, np.array(is_transit), edges, delays, delay.astype(np.float32),
                       pred.astype(np.int32))


def path_links(pred: np.ndarray, link_index, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (pair, link) for every physical link on the shortest path a[pair] -> b[pair].

    Walks the predecessor matrix backwards from b for all pairs at once.
    """
    a = np.asarray(a, dtype=np.int64)
    cur = np.asarray(b, dtype=np.int64).copy()
    active = np.flatnonzero(cur != a)
    pairs, links = [], []
    while len(active):
        prev = pred[a[active], cur[active]].astype(np.int64)
        pairs.append(active)
        links.append(np.asarray(link_index[prev, cur[active]]).ravel() - 1)
        cur[active] = prev
        active = active[prev != a[active]]
    if not pairs:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(pairs), np.concatenate(links).astype(np.int64)


def on_sites(model: str, n: int, site_delay: np.ndarray, lan: float, rng: np.random.Generator,
             distinct: bool) -> Proximity:
    """Return n nodes attached to random sites of a site-delay matrix."""
    return Proximity(model, site=site_draw(n, len(site_delay), rng, distinct), site_delay=site_delay, lan=lan)


def site_draw(n: int, sites: int, rng: np.random.Generator, distinct: bool) -> np.ndarray:
    """Return the sites (int32) of n nodes drawn at random among `sites`, distinct ones if asked."""
    site = rng.choice(sites, size=n, replace=False) if distinct else rng.integers(0, sites, size=n)
    return site.astype(np.int32)


def load_matrix(path: str | Path) -> np.ndarray:
    """Load an N x N latency matrix (ms) from .npy or whitespace/comma separated text."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"latency matrix file not found: {path}")
    if path.suffix == ".npy":
        m = np.load(path)
    else:
        text = path.read_text()
        m = np.loadtxt(path, delimiter="," if "," in text else None, ndmin=2)
    m = np.asarray(m, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"latency matrix {path} must be square, got shape {m.shape}")
    if not np.all(np.isfinite(m)) or (m < 0).any():
        raise ValueError(f"latency matrix {path} must hold finite non-negative delays")
    return m.astype(np.float32)
