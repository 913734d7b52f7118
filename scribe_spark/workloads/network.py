"""Rings of node ids placed under a proximity model, and the shared router network or latency matrix."""
from __future__ import annotations

import numpy as np

from scribe_spark import ids, topology
from scribe_spark.pastry.kernels import Ring
from scribe_spark.streams import Purpose, stream


def make_ring(n: int, p, rng: np.random.Generator, routers: topology.TransitStub | None = None,
              matrix: np.ndarray | None = None) -> Ring:
    """Return n nodes with random ids placed under the configured proximity model."""
    hi, lo = ids.random_ids(n, rng)
    if p.proximity == "plane":
        prox = topology.plane(n, rng)
    elif p.proximity == "sphere":
        prox = topology.sphere(n, rng)
    elif p.proximity == "transit-stub":
        prox = topology.on_sites("transit-stub", n, routers.delay, topology.LAN_DELAY_MS, rng, distinct=False)
    else:
        if n > len(matrix):   # the parameters' check refuses this before Spark starts
            raise RuntimeError(f"{n} nodes but the latency matrix has only {len(matrix)} sites")
        prox = topology.on_sites("matrix", n, matrix, 0.0, rng, distinct=True)
    return Ring(hi, lo, p.b, p.leaf_set, p.neighborhood, prox)


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
