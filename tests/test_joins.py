"""Pastry joins as supersteps: an overlay grown by joins routes correctly (docs/model.md, Pastry)."""
import os

import numpy as np
import pandas as pd
import pytest

from scribe_spark import ids
from scribe_spark.pastry import joins, kernels
from scribe_spark.pastry import overlay as ov
from scribe_spark.reference import closest, routing_tables
from tests.helpers import adaptive_execution_off, small_ring


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


def test_a_grown_table_with_fewer_rows_counts_the_missing_slots_as_empty():
    """compare_tables and row_quality count the same slots: every one the converged tables fill."""
    ring = small_ring(400, seed=3)
    nodes = np.arange(ring.n)
    conv = pd.DataFrame({"rt": kernels.routing_tables(ring, nodes)}, index=nodes)
    cols = 1 << ring.b
    grown = pd.DataFrame({"rt": [rt[:cols] for rt in conv.rt]}, index=nodes)   # the first row only
    cmp = routing_tables.compare_tables(ring, grown, conv)
    q = routing_tables.row_quality(ring, grown, conv)
    filled = sum(int((np.asarray(rt) >= 0).sum()) for rt in conv.rt)
    first = sum(int((np.asarray(rt[:cols]) >= 0).sum()) for rt in conv.rt)
    assert first < filled
    assert cmp["entries"] == filled == q[["empty", "optimal", "suboptimal"]].to_numpy().sum()
    assert cmp["best"] == first == q.optimal.sum() and cmp["invalid"] == 0
    assert q["empty"][q.row > 0].sum() == filled - first


def test_take_nearer_keeps_the_nearest_valid_node_per_slot():
    """Each slot ends with the nearest of its entry and the candidates whose id fits it (by hex digits)."""
    ring = small_ring(400, seed=3)
    rng = np.random.default_rng(4)
    hexes = ids.to_hex(ring.hi, ring.lo)
    me = 7
    table = np.full(3 * 16, -1, dtype=np.int64)
    cand = rng.choice(np.setdiff1d(np.arange(ring.n), [me]), 120, replace=False)
    got = joins.take_nearer(ring, me, table, cand[:60])        # from empty, then improved
    got = joins.take_nearer(ring, me, got, cand[60:])
    for row in range(len(got) // 16):
        for col in range(16):
            fits = [y for y in cand if len(os.path.commonprefix([hexes[y], hexes[me]])) == row
                    and int(hexes[y][row], 16) == col]
            want = min(fits, key=lambda y: ring.prox.dist(np.array([me]), np.array([y]))[0]) if fits else -1
            assert got[row * 16 + col] == want, (row, col)


def test_second_phase_exchanges_hold_without_adaptive_execution(spark):
    """The node state after a table exchange is cached from a local checkpoint; Spark may miss that cache
    (it did without adaptive execution) and must then still find the checkpoint."""
    ring = small_ring(60, seed=8)
    with adaptive_execution_off(spark):
        overlay, counts = joins.grow(spark, ring, initial=30, batch=30, rng=np.random.default_rng(9),
                                     improve="tables")
        assert sorted(r.id for r in overlay.state.select("id").collect()) == list(range(ring.n))
    assert counts["row_exchange"] > 0 and counts["table_exchange"] > 0
    overlay.unpersist()


def test_an_unknown_second_join_phase_is_refused(grown):
    _, overlay, _ = grown
    with pytest.raises(ValueError, match="improve"):
        joins.join_batch(overlay, np.arange(overlay.ring.n), np.array([], dtype=np.int64), improve="all")


@pytest.mark.slow
def test_pastry_joins_job_second_phases_find_nearer_nodes_and_count_every_slot_once(tiny):
    """Every phase routes correctly with valid entries; the exchanges raise the optimal ones."""
    folder = tiny("pastry_joins")
    j = pd.read_csv(folder / "joins.csv").set_index("improve")
    q = pd.read_csv(folder / "join_quality.csv")
    assert list(j.index) == ["none", "rows", "tables"]
    assert (j.correct_fraction == 1).all() and (j.leaf_sets_converged == 1).all()
    assert (j.invalid_entries == 0).all()
    totals = q.groupby("improve")[["empty", "optimal", "suboptimal"]].sum()
    best = (j.proximity_best_share * j.entries).round()   # the optimal slots are compare_tables' best ones
    assert (totals.optimal[j.index] == best).all()
    assert (totals.sum(axis=1)[j.index] == j.entries).all()   # both count every slot the converged fill
    assert totals.at["rows", "optimal"] > totals.at["none", "optimal"]
    assert j.at["none", "row_exchange_per_newcomer"] == 0 and j.at["rows", "row_exchange_per_newcomer"] > 0
    assert j.at["rows", "table_exchange_per_newcomer"] == 0
    assert j.at["tables", "table_exchange_per_newcomer"] > 0
    assert (folder / "join_quality.png").stat().st_size > 0


def test_a_batch_many_times_the_overlay_ends_with_the_true_leaf_sets_within_the_bound(spark, progress):
    # 8 members, 192 newcomers: runs of dozens of newcomers between two old members, which only
    # the answers to leaf sets from non-members settle (without them most leaf sets stayed wrong)
    ring = small_ring(200, seed=12)
    order = np.random.default_rng(13).permutation(ring.n)
    members, xs = np.sort(order[:8]), np.sort(order[8:])
    bound = joins.exchange_bound(ring, members, xs)
    first = joins.initial_overlay(spark, ring, members)
    grown, counts = joins.join_batch(first, members, xs)
    got = grown.state.select("id", "leaf").toPandas().set_index("id").sort_index()
    want = kernels.leaf_sets(ring, np.arange(ring.n))
    assert [set(np.asarray(v).tolist()) for v in got.leaf] == [set(v.tolist()) for v in want]
    in_flight = [int(line.split(": ")[1].split()[0]) for line in progress
                 if line.startswith("leaf-set exchange superstep")]
    assert bound == 2 * 7 + 2 and len(in_flight) == 9   # g = 53 newcomers in one run: ceil(53 / 8) + 2
    # every node first sends its 16 leaf-set entries; then what each superstep left in flight
    assert counts["leaf_exchange"] == ring.n * 16 + sum(in_flight)
    grown.unpersist()


def test_exchange_bound_counts_the_longest_run_of_newcomers_between_old_members():
    ring = small_ring(40, seed=14)          # |L| = 16: h = 8
    by_pos = ring.order                     # node numbers in ring order
    members = by_pos[[5, 15, 35]]           # runs of 9, 19 and 9 newcomers (the last wraps to the start)
    xs = np.setdiff1d(np.arange(40), members)
    assert joins.exchange_bound(ring, members, xs) == 2 * 3 + 2
    assert joins.exchange_bound(ring, by_pos[::2], by_pos[1::2]) == 2 * 1 + 2
