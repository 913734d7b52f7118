"""Pastry joins as supersteps: an overlay grown by joins routes correctly (SPEC section 2)."""
import numpy as np
import pytest

from scribe_spark import ids
from scribe_spark.pastry import joins
from scribe_spark.pastry import overlay as ov
from scribe_spark.reference import closest, routing_tables
from tests.helpers import small_ring


@pytest.fixture(scope="module")
def grown(spark):
    ring = small_ring(500, seed=8)
    overlay, counts = joins.grow(spark, ring, initial=100, batch=100, rng=np.random.default_rng(9))
    return ring, overlay, counts


def test_grown_overlay_routes_every_lookup_to_the_closest_node(spark, grown):
    ring, overlay, _ = grown
    rng = np.random.default_rng(10)
    src = rng.integers(0, ring.n, 1500)
    khi, klo = ids.random_ids(1500, rng)
    routed = ov.route(overlay, ov.messages_frame(spark, src, khi, klo))
    routed = routed.toPandas().sort_values("mid")
    assert (routed.dest.to_numpy() == closest.closest_live(ring, np.ones(ring.n, dtype=bool), khi, klo)).all()


def test_grown_state_against_the_converged_construction(spark, grown):
    ring, overlay, counts = grown
    got = overlay.state.toPandas().set_index("id").sort_index()
    want = ov.build_overlay(spark, ring, "proximity").state.toPandas().set_index("id").sort_index()
    assert list(got.index) == list(range(ring.n))
    # leaf sets: exactly the converged ones (after the leaf-set exchange)
    assert all(set(np.asarray(a).tolist()) == set(np.asarray(b).tolist()) for a,
               b in zip(got.leaf, want.leaf))
    cmp = routing_tables.compare_tables(ring, got, want)
    assert cmp["invalid"] == 0 and cmp["entries"] > 0
    assert 0.3 < cmp["best_share"] < 1.0     # valid everywhere, proximity-best in most entries but not all
    assert counts["route"] > 0 and counts["notify"] > 0 and counts["leaf_exchange"] > 0
