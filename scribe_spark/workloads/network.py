"""Rings of node ids placed under a proximity model, and the shared router network or latency matrix.

A ring of N nodes is drawn in blocks of `RING_BLOCK` node numbers, each block from a stream of its
own (`ring_block`), so that any process can draw any block: the driver draws a ring of one block
itself, and a larger ring is drawn block by block in Spark tasks and sorted there (`ring_files`),
never held whole in the driver's memory. Both give the same ring for a seed.
"""
from __future__ import annotations

import numpy as np

from scribe_spark import topology
from scribe_spark.pastry.kernels import Ring
from scribe_spark.streams import Purpose, stream

RING_BLOCK = 1 << 20    # node numbers drawn from one stream


def ring_blocks(n: int, size: int) -> int:
    """The number of blocks of `size` nodes of an n-node ring."""
    return -(-n // size)


def ring_block(n: int, block: int, seed: int, model: str, sites: int,
               size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Block `block` of `size` nodes of an n-node ring: the ids (hi, lo) and locations (coordinates, or
    sites of `sites`) of node numbers block * size onwards."""
    m = min(size, n - block * size)
    # block 0 draws from the stream a whole ring was drawn from before rings came in blocks, so that
    # a ring of one block, and every table made on it, is unchanged; later blocks from a purpose of
    # their own ([seed, n, block] alone would be the stream of purpose `block`)
    rng = stream(seed, None, n) if block == 0 else stream(seed, Purpose.RING, n, block)
    hi = rng.integers(0, 2**64, size=m, dtype=np.uint64)
    lo = rng.integers(0, 2**64, size=m, dtype=np.uint64)
    if model == "plane":
        return hi, lo, topology.plane(m, rng).coords
    if model == "sphere":
        return hi, lo, topology.sphere(m, rng).coords
    if model == "matrix" and m != n:   # distinct sites: one block (the matrix's sites^2 delays are larger)
        raise ValueError(f"a ring on a latency matrix is drawn in one block; {n} nodes is more")
    return hi, lo, topology.site_draw(m, sites, rng, distinct=model == "matrix")


def proximity(model: str, where: np.ndarray, routers: topology.TransitStub | None,
              matrix: np.ndarray | None) -> topology.Proximity:
    """The proximity model of nodes at `where` (coordinates, or sites of the routers or the matrix)."""
    if model in ("plane", "sphere"):
        return topology.Proximity(model, coords=where)
    if model == "transit-stub":
        return topology.Proximity(model, site=where, site_delay=routers.delay, lan=topology.LAN_DELAY_MS)
    return topology.Proximity(model, site=where, site_delay=matrix, lan=0.0)


def site_count(p, routers: topology.TransitStub | None, matrix: np.ndarray | None) -> int:
    """The sites nodes attach to under the configured model (0 for coordinate models)."""
    if p.proximity == "transit-stub":
        return routers.n_routers
    return len(matrix) if p.proximity == "matrix" else 0


def make_ring(n: int, p, seed: int, routers: topology.TransitStub | None = None,
              matrix: np.ndarray | None = None, spark=None) -> Ring:
    """Return n nodes with random ids placed under the configured proximity model.

    With a Spark session, a ring of more than one block is drawn and sorted in Spark and kept in
    memory-mapped files (`ring_files`); otherwise the driver draws it, with the same result."""
    if p.proximity == "matrix" and n > len(matrix):   # the parameters' check refuses this before Spark starts
        raise RuntimeError(f"{n} nodes but the latency matrix has only {len(matrix)} sites")
    sites, size = site_count(p, routers, matrix), RING_BLOCK
    if spark is not None and ring_blocks(n, size) > 1:
        from scribe_spark.workloads import ring_files
        return ring_files.spark_ring(spark, n, p, seed, routers, matrix, size)
    parts = [ring_block(n, k, seed, p.proximity, sites, size) for k in range(ring_blocks(n, size))]
    hi, lo, where = (np.concatenate(a) for a in zip(*parts))
    return Ring(hi, lo, p.b, p.leaf_set, p.neighborhood, proximity(p.proximity, where, routers, matrix))


def shared_network(p, seed: int):
    """Return (router graph, latency matrix) for the configured model; None where unused."""
    if p.proximity == "transit-stub":
        t = p.topology
        return topology.transit_stub(stream(seed, Purpose.NETWORK), transit_domains=t.transit_domains,
                                     routers_per_transit=t.routers_per_transit,
                                     stubs_per_transit_router=t.stubs_per_transit_router,
                                     routers_per_stub=t.routers_per_stub, edge_prob=t.edge_prob,
                                     delay_transit_transit=t.delay_transit_transit,
                                     delay_inter_transit=t.delay_inter_transit,
                                     delay_transit_stub=t.delay_transit_stub,
                                     delay_stub_stub=t.delay_stub_stub), None
    if p.proximity == "matrix":
        return None, topology.load_matrix(p.matrix)
    return None, None
