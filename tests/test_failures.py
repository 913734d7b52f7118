"""Node failures and repair: routes, leaf sets and routing tables against brute force (P3)."""
import logging

import numpy as np
import pandas as pd
import pytest

from scribe_spark import ids
from scribe_spark.pastry import failures as fl
from scribe_spark.pastry import kernels
from scribe_spark.pastry import overlay as ov
from scribe_spark.pastry.kernels import Ring
from scribe_spark.reference import closest
from tests.helpers import closest_brute, int_ids, node_ints, small_ring


@pytest.fixture(scope="module")
def failed(spark):
    """600 nodes (b=2, |L|=8), 15% failed; the converged overlay and the repaired one."""
    ring = small_ring(600, b=2, leaf=8, nbr=8, seed=4)
    rng = np.random.default_rng(5)
    dead = np.zeros(ring.n, dtype=bool)
    dead[rng.choice(ring.n, 90, replace=False)] = True
    overlay = ov.build_overlay(spark, ring, "proximity", seed=1)
    repaired, counts = fl.repair(overlay, dead)
    return ring, dead, overlay, repaired, counts


def _lookups(ring, dead, count=400, seed=6):
    rng = np.random.default_rng(seed)
    src = rng.choice(np.flatnonzero(~dead), count)
    khi, klo = ids.random_ids(count, rng)
    return src, khi, klo


def test_closest_live_matches_brute_force(failed):
    ring, dead, *_ = failed
    _, khi, klo = _lookups(ring, dead, 200)
    ints = node_ints(ring)
    live = np.flatnonzero(~dead)
    live_ints = [ints[i] for i in live]
    want = [live[closest_brute(live_ints, key)] for key in int_ids(khi, klo)]
    assert (closest.closest_live(ring, ~dead, khi, klo) == want).all()


@pytest.mark.parametrize("phase", ["after_failure", "after_repair"])
def test_lookups_reach_the_closest_live_node(spark, failed, phase):
    ring, dead, overlay, repaired, _ = failed
    current = fl.without_dead(overlay, dead) if phase == "after_failure" else repaired
    src, khi, klo = _lookups(ring, dead)
    routed = ov.route(current, ov.messages_frame(spark, src, khi, klo))
    routed = routed.toPandas().sort_values("mid")
    assert (routed.dest.to_numpy() == closest.closest_live(ring, ~dead, khi, klo)).all()
    assert not dead[routed.dest].any()


def test_forget_leaf_keeps_the_layout_and_the_farthest_believed_alive():
    leaf = np.array([5, 6, 7, 8, 1, 2, 3, 4])     # L = 8: smaller side 5..8, larger side 1..4, nearest first
    assert kernels._forget_leaf(leaf, 6, 0, 8).tolist() == [5, 5, 7, 8, 1, 2, 3, 4]
    assert kernels._forget_leaf(leaf, 5, 0, 8).tolist() == [0, 6, 7, 8, 1, 2, 3, 4]
    assert kernels._forget_leaf(leaf, 4, 0, 8).tolist() == [5, 6, 7, 8, 1, 2, 3, 3]
    assert kernels._forget_leaf(np.array([1, 2, 3]), 2, 0, 8).tolist() == [1, 3]   # a small ring: no layout


def test_a_dead_next_hop_times_out_and_the_node_picks_a_live_one_that_makes_progress():
    ring = small_ring(300, b=2, leaf=8, nbr=8, seed=9)
    nodes = np.arange(ring.n)
    state = [kernels.leaf_sets(ring, nodes), kernels.routing_tables(ring, nodes, "proximity", 1),
             kernels.neighborhood_sets(ring, nodes)]
    rng = np.random.default_rng(2)
    dead = np.zeros(ring.n, dtype=bool)
    dead[rng.choice(ring.n, 45, replace=False)] = True
    at = rng.choice(np.flatnonzero(~dead), 3000)        # messages sit at live nodes
    khi, klo = ids.random_ids(len(at), rng)
    flat = [a for part in state for a in kernels._concat([part[i] for i in at])]
    first, rule = kernels.route_step(ring, khi, klo, at, *flat)
    nxt, rule2, timeouts, met_i, met_node = kernels.route_step_timeouts(ring, khi, klo, at, *flat, dead)
    hit = (rule != kernels.DELIVERED) & dead[first]
    assert hit.sum() > 100
    assert (timeouts[~hit] == 0).all() and (nxt[~hit] == first[~hit]).all()
    assert (timeouts[hit] >= 1).all() and timeouts.sum() == len(met_i) and dead[met_node].all()
    first_met = {int(i): int(n) for i, n in zip(met_i[::-1], met_node[::-1])}   # each message's first timeout
    assert all(first_met[int(i)] == first[i] for i in np.flatnonzero(hit))
    moved = rule2 != kernels.DELIVERED
    assert not dead[nxt[moved]].any()
    # progress: a longer shared prefix with the key (table), or numerically closer (leaf set, rare case)
    def pre(x):
        return ids.shared_prefix_digits(ring.hi[x], ring.lo[x], khi[moved], klo[moved], ring.b)
    a, n = at[moved], nxt[moved]
    closer = ids.closer(ring.hi[n], ring.lo[n], ring.hi[a], ring.lo[a], khi[moved], klo[moved])
    assert ((pre(n) > pre(a)) | closer).all()


def test_lookups_meeting_unknown_dead_entries_time_out_and_still_arrive(spark, failed):
    ring, dead, overlay, *_ = failed
    src, khi, klo = _lookups(ring, dead)
    unknown = closest.checked_lookups(overlay, src, khi, klo, ~dead, dead=dead)
    known = closest.checked_lookups(fl.without_dead(overlay, dead), src, khi, klo, ~dead, dead=dead)
    assert unknown.correct.all() and known.correct.all()
    assert unknown.timeouts.sum() > 0 and known.timeouts.sum() == 0


def test_lazy_repair_repairs_exactly_the_entries_routes_find_dead(spark, failed):
    ring, dead, overlay, *_ = failed
    lazy = fl.LazyRepair(overlay, dead)
    src, khi, klo = _lookups(ring, dead, 1500, seed=8)
    passes = [closest.checked_lookups(lazy.overlay, src, khi, klo, ~dead, dead=dead, repair=lazy)
              for _ in range(2)]
    c = lazy.counts
    assert all(r.correct.all() for r in passes)
    assert passes[1].timeouts.sum() < passes[0].timeouts.sum()
    assert 0 < c["table_repaired"] <= c["table_met"] < c["table_holes"]
    assert c["table_messages"] >= 2 * c["table_repaired"]
    st = lazy.overlay.state.select("id", "leaf", "rt", "nbr").toPandas()
    rts = [np.asarray(rt) for rt in st.rt]
    left = sum(int((dead[np.maximum(rt, 0)] & (rt >= 0)).sum()) for rt in rts)
    assert left == c["table_holes"] - c["table_met"]     # lazy: entries no route met are still dead
    assert not any(dead[np.asarray(x)].any() for col in ("leaf", "nbr") for x in st[col])
    before = overlay.state.select("id", "rt").toPandas().set_index("id").rt
    changed = sum(int(((np.asarray(before[i]) != rt) & (rt >= 0)).sum()) for i, rt in zip(st.id, rts))
    assert changed == c["table_repaired"]


def test_repaired_leaf_sets_equal_the_converged_leaf_sets_of_the_survivors(failed):
    ring, dead, _, repaired, counts = failed
    live = np.flatnonzero(~dead)
    survivors = Ring(ring.hi[live], ring.lo[live], ring.b, ring.leaf_set, ring.neighborhood, ring.prox)
    leaf = kernels.leaf_sets(survivors, np.arange(len(live)))
    want = {int(live[i]): set(live[s].tolist()) for i, s in enumerate(leaf)}
    got = repaired.state.select("id", "leaf").toPandas()
    assert len(got) == len(live)
    assert all(set(np.asarray(leaf).tolist()) == want[i] for i, leaf in zip(got.id, got.leaf))
    assert counts["leaf_messages"] > 0 and counts["leaf_messages"] % 2 == 0


def test_repaired_routing_tables_hold_only_live_valid_entries(failed):
    ring, dead, overlay, repaired, counts = failed
    cols, digits = 1 << ring.b, ring.digits
    st = repaired.state.select("id", "rt").toPandas()
    before = overlay.state.select("id", "rt").toPandas().set_index("id").rt
    filled = 0
    for node, rt in zip(st.id, st.rt):
        rt = np.asarray(rt)
        assert len(rt) == len(before[node])
        slot = np.flatnonzero(rt >= 0)
        e = rt[slot]
        assert not dead[e].any()
        r, c = slot // cols, slot % cols
        assert (ids.shared_prefix_digits(ring.hi[e], ring.lo[e], np.full(len(e), ring.hi[node]),
                                         np.full(len(e), ring.lo[node]), ring.b) >= r).all()
        assert (ids.digit(ring.hi[e], ring.lo[e], np.minimum(r, digits - 1), ring.b) == c).all()
        old = np.asarray(before[node])
        filled += int(((old >= 0) & dead[np.maximum(old, 0)] & (rt >= 0)).sum())
    assert filled == counts["table_repaired"] > 0
    assert counts["table_holes"] >= counts["table_repaired"]
    assert counts["table_messages"] >= 2 * counts["table_repaired"]


@pytest.mark.slow
def test_pastry_failures_job(tiny):
    out = tiny("pastry_failures")
    t = pd.read_csv(out / "failures.csv").set_index("phase")
    assert list(t.index) == ["before", "after_failure", "after_repair"]
    assert (t.lookups == 3000).all()
    assert (t.correct_fraction == 1.0).all()
    assert t.loc["before", "timeouts_per_lookup"] == 0
    assert t.loc["after_failure", "timeouts_per_lookup"] > t.loc["after_repair", "timeouts_per_lookup"] > 0
    assert t.loc["after_repair", "repair_messages_per_failed_node"] > 0
    passes = pd.read_csv(out / "lazy_passes.csv")
    assert list(passes["pass"]) == [1, 2]
    assert passes.timeouts_per_lookup[1] < passes.timeouts_per_lookup[0]
    assert passes.timeouts_per_lookup[0] == t.loc["after_repair", "timeouts_per_lookup"]
    repair = pd.read_csv(out / "repair.csv").iloc[0]
    assert repair.table_met == passes.entries_found_dead.sum() < repair.table_holes
    # RPCs (request + reply) per failed node: leaf-set + table, all passes; pass 1 is the after_repair row
    failed = repair.failed_nodes
    assert repair.leaf_rpcs_per_failed_node * failed * 2 == pytest.approx(repair.leaf_messages)
    assert repair.table_rpcs_per_failed_node * failed * 2 == pytest.approx(passes.table_messages.sum())
    assert repair.rpcs_per_failed_node == pytest.approx(repair.leaf_rpcs_per_failed_node
                                                        + repair.table_rpcs_per_failed_node)
    assert t.loc["after_repair", "repair_rpcs_per_failed_node"] == pytest.approx(
        repair.leaf_rpcs_per_failed_node + passes.table_rpcs_per_failed_node[0])
    assert (out / "failures.png").stat().st_size > 0


def _survivors_leaf_sets(ring: Ring, dead: np.ndarray) -> dict[int, set[int]]:
    """Each survivor's converged leaf set among the survivors (brute force by the kernels)."""
    live = np.flatnonzero(~dead)
    survivors = Ring(ring.hi[live], ring.lo[live], ring.b, ring.leaf_set, ring.neighborhood, ring.prox)
    return {int(live[i]): set(live[s].tolist())
            for i, s in enumerate(kernels.leaf_sets(survivors, np.arange(len(live))))}


def test_runs_of_failures_shorter_than_half_the_leaf_set_are_mended_within_the_bound(spark, progress):
    # |L| = 8 (h = 4); in ring order three of every four nodes fail: runs of 3 = h - 1, the longest
    # the repair can mend, whose bound is ceil(4 x 4 / 1) + 1 = 17 supersteps. Contacts mend at the
    # same time, so a node's reach doubles: 2 supersteps.
    ring = small_ring(160, b=2, leaf=8, nbr=8, seed=15)
    dead = np.zeros(ring.n, dtype=bool)
    dead[ring.order[np.arange(ring.n) % 4 != 0]] = True
    assert fl.repair_bound(ring, np.arange(ring.n), dead) == 17
    overlay = ov.build_overlay(spark, ring, "proximity", seed=1)
    state, messages = fl.repair_leaf_sets(overlay, dead)
    got = state.select("id", "leaf").toPandas()
    want = _survivors_leaf_sets(ring, dead)
    assert sorted(got.id) == sorted(want)
    assert all(set(np.asarray(leaf).tolist()) == want[i] for i, leaf in zip(got.id, got.leaf))
    supersteps = sum(line.startswith("leaf-set repair superstep") for line in progress)
    # the 40 survivors ask on both sides in both supersteps
    assert supersteps == 2 and messages == fl.MESSAGES_PER_RPC * (80 + 80)
    overlay.unpersist()


def test_a_run_of_half_a_leaf_set_of_failures_stops_the_repair_at_the_nodes_it_cuts_off(spark, progress):
    # |L| = 8: 4 adjacent nodes fail, the case the Pastry paper says leaf-set repair cannot mend. The
    # nodes beside the run drop the dead ones in the first superstep and learn nothing in the second,
    # so the repair stops there and says how many nodes are left short; before, it asked the same
    # questions until its fixed bound of 20 supersteps, each slower than the one before.
    ring = small_ring(160, b=2, leaf=8, nbr=8, seed=16)
    dead = np.zeros(ring.n, dtype=bool)
    dead[ring.order[50:54]] = True
    assert fl.repair_bound(ring, np.arange(ring.n), dead) == 2
    overlay = ov.build_overlay(spark, ring, "proximity", seed=1)
    warned = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warned.append(record.getMessage())
    logging.getLogger("scribe_spark.pastry.failures").addHandler(handler)
    try:
        state, _ = fl.repair_leaf_sets(overlay, dead)
    finally:
        logging.getLogger("scribe_spark.pastry.failures").removeHandler(handler)
    assert [line.split(" (")[0] for line in progress] == ["leaf-set repair superstep 1: 8 requests in flight",
                                                          "leaf-set repair superstep 2: 0 requests in flight"]
    assert len(warned) == 1 and "8 nodes keep fewer than |L|/2 live members on a side" in warned[0]
    want = _survivors_leaf_sets(ring, dead)
    got = state.select("id", "leaf").toPandas()
    beside = set(ring.order[46:50].tolist()) | set(ring.order[54:58].tolist())   # 4 on each side of the run
    wrong = {int(i) for i, leaf in zip(got.id, got.leaf) if set(np.asarray(leaf).tolist()) != want[i]}
    assert wrong == beside
    overlay.unpersist()


def test_runs_are_read_around_the_ring_and_among_members_only():
    assert sorted(kernels.runs(np.array([1, 1, 0, 1, 0, 1, 1], dtype=bool)).tolist()) == [1, 4]
    assert kernels.runs(np.zeros(3, dtype=bool)).tolist() == []
    assert kernels.runs(np.ones(3, dtype=bool)).tolist() == [3]
    assert kernels.runs(np.zeros(0, dtype=bool)).tolist() == []
    # a partial overlay: it holds every other node; the others never joined and count as dead, yet a
    # run counts adjacent members only: members 2 and 3 (ring positions 4, 6) failing are a run of 2
    ring = small_ring(20, b=2, leaf=8, nbr=8, seed=17)
    members = ring.order[::2]
    dead = np.ones(ring.n, dtype=bool)
    dead[members] = False
    dead[ring.order[[4, 6]]] = True
    assert kernels.member_runs(ring, members, dead).tolist() == [2]
    assert fl.repair_bound(ring, members, dead) == -(-4 * 3 // 2) + 1


def test_the_survivors_rows_come_from_a_join_in_the_states_order_not_from_a_list_in_the_plan(failed):
    """The live nodes' rows are those a filter on the dead list keeps, in the same order, and the plan
    holds no list of the dead (a literal every task would carry): a broadcast anti-join drops them."""
    from pyspark.sql import functions as F
    _ring, dead, overlay, *_ = failed
    state = overlay.state
    live = fl._live_rows(state, dead)
    want = state.where(~F.col(ov.ID).isin([int(x) for x in np.flatnonzero(dead)]))
    assert [r.id for r in live.select(ov.ID).collect()] == [r.id for r in want.select(ov.ID).collect()]
    assert 0 < live.count() < state.count()
    plan = live._jdf.queryExecution().executedPlan().toString()
    assert "BroadcastHashJoin" in plan and "LeftAnti" in plan and "INSET" not in plan and " IN (" not in plan
