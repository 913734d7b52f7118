"""Pastry state and superstep routing, each checked against an independent brute force."""
import math

import numpy as np
import pytest

from scribe_spark import bsp, ids, topology
from scribe_spark.pastry import kernels
from scribe_spark.pastry import overlay as ov
from tests.helpers import (
    M,
    closest_brute,
    halfway,
    id_arrays,
    int_ids,
    node_ints,
    plain_python_tasks,
    small_ring,
)


@pytest.fixture(scope="module")
def overlay_1500(spark):
    ring = small_ring(1500)
    o = ov.build_overlay(spark, ring, "proximity", seed=1)
    yield o
    o.unpersist()


def _state(overlay):
    return {r.id: r for r in overlay.state.collect()}


@pytest.mark.parametrize("n, b, model", [(1500, 4, "plane"), (700, 2, "sphere"), (600, 1, "transit-stub"),
                                         (400, 8, "plane"), (12, 4, "plane"),
                                         (500, 4, "matrix")])
def test_routes_end_at_numerically_closest_node_within_hop_bound(spark, n, b, model):
    ring = small_ring(n, b, model, seed=n)
    o = ov.build_overlay(spark, ring, "proximity", seed=3)
    rng = np.random.default_rng(11)
    k = 1500
    khi, klo = ids.random_ids(k, rng)
    # include keys equal to node ids and keys right next to them
    e = min(100, n)
    khi[:e], klo[:e] = ring.hi[:e], ring.lo[:e]
    khi[e:2 * e], klo[e:2 * e] = ring.hi[:e], ring.lo[:e] + np.uint64(1)
    src = rng.integers(0, n, k)
    routed = ov.route(o, ov.messages_frame(spark, src, khi, klo)).toPandas()
    o.unpersist()
    assert len(routed) == k and sorted(routed.mid) == list(range(k))
    ints = node_ints(ring)
    routed = routed.sort_values("mid")
    want = [closest_brute(ints, key) for key in int_ids(khi, klo)]
    assert list(routed.dest) == want
    bound = math.ceil(math.log(n, 2 ** b)) + 1
    assert routed.hops.max() <= bound
    # a key equal to a node id always has a routing-table candidate: no rare case on its route
    assert routed.rare.iloc[:e].sum() == 0


def test_routing_tables_satisfy_prefix_invariant_and_are_complete(spark, overlay_1500):
    ring = overlay_1500.ring
    edges = overlay_1500.routing_edges().toPandas()
    assert set(edges.columns) >= {"src", "dst", "row", "col"}
    sh = ids.shared_prefix_digits(ring.hi[edges.src], ring.lo[edges.src], ring.hi[edges.dst],
                                  ring.lo[edges.dst], 4)
    assert (sh == edges.row).all()
    assert (ids.digit(ring.hi[edges.dst], ring.lo[edges.dst], edges.row, 4) == edges.col).all()
    # completeness: an entry exists exactly where some candidate exists (brute force over all nodes)
    have = set(zip(edges.src, edges.row, edges.col))
    ints = node_ints(ring)
    for x in range(0, ring.n, 25):
        for y in range(ring.n):
            if y == x:
                continue
            r = (128 - (ints[x] ^ ints[y]).bit_length()) // 4
            c = (ints[y] >> (128 - 4 * (r + 1))) & 15
            assert (x, r, c) in have


def test_proximity_selection_picks_a_closest_candidate(spark, overlay_1500):
    ring = overlay_1500.ring
    edges = overlay_1500.routing_edges().toPandas()
    ints = np.array(node_ints(ring), dtype=object)
    sample = edges[edges.src % 7 == 0]
    for src, dst, row, col in sample[["src", "dst", "row", "col"]].itertuples(index=False):
        # brute force: all nodes sharing `row` digits with src and having digit `col` there
        prefix = ints[src] >> (128 - 4 * (row + 1))
        want_prefix = ((prefix >> 4) << 4) | col
        cands = np.array([y for y in range(ring.n) if ints[y] >> (128 - 4 * (row + 1)) == want_prefix])
        d = ring.prox.dist(np.full(len(cands), src), cands)
        assert ring.prox.dist(np.array([src]), np.array([dst]))[0] == pytest.approx(d.min())


def test_random_mode_picks_valid_candidates_and_routes_longer(spark):
    ring = small_ring(1500)
    rnd = ov.build_overlay(spark, ring, "random", seed=1)
    prox = ov.build_overlay(spark, ring, "proximity", seed=1)
    edges = rnd.routing_edges().toPandas()
    sh = ids.shared_prefix_digits(ring.hi[edges.src], ring.lo[edges.src], ring.hi[edges.dst],
                                  ring.lo[edges.dst], 4)
    assert (sh == edges.row).all()
    msgs = ov.lookups(spark, ring, 3000, 2, None)
    rel = {}
    for name, o in (("random", rnd), ("proximity", prox)):
        r = ov.route(o, msgs).toPandas()
        rel[name] = (r.distance / r.direct).mean()
        o.unpersist()
    assert rel["proximity"] < 2.0 < rel["random"]


def test_leaf_and_neighborhood_sets_match_brute_force(spark, overlay_1500):
    ring = overlay_1500.ring
    state = _state(overlay_1500)
    ints = node_ints(ring)
    order = sorted(range(ring.n), key=lambda i: ints[i])
    for x in range(0, ring.n, 50):
        p = order.index(x)
        smaller = [order[(p - k) % ring.n] for k in range(1, 9)]
        larger = [order[(p + k) % ring.n] for k in range(1, 9)]
        assert list(state[x].leaf) == smaller + larger
        d = ring.prox.dist(np.full(ring.n, x), np.arange(ring.n))
        d[x] = np.inf
        assert sorted(d[list(state[x].nbr)]) == pytest.approx(np.sort(d)[:32])


@pytest.mark.parametrize("n, model, nbr, site_lists", [
    (3000, "transit-stub", 32, True), (3000, "transit-stub", 4, True), (3000, "transit-stub", 4, False),
    (400, "matrix", 32, True), (300, "matrix", 100, True), (40, "transit-stub", 60, True)])
def test_site_model_neighborhood_sets_match_brute_force(n, model, nbr, site_lists, monkeypatch):
    # the nearest by (site delay, site, id). 3000 nodes on a small transit-stub network put about 5
    # on a site: with |M| = 4 a node is often not among its site's first |M| + 1 members. One node
    # per site (matrix) with |M| = 100 looks past the 64 nearest sites; 40 nodes with |M| = 60 take
    # everyone; without per-site lists (over SITE_ORDER_MAX_SITES sites) each query site sorts them
    if not site_lists:
        monkeypatch.setattr(topology, "SITE_ORDER_MAX_SITES", 0)
    ring = small_ring(n, model=model, nbr=nbr)
    site, delay = ring.prox.site, ring.prox.site_delay
    nodes = np.arange(0, n, 7)
    got = kernels.neighborhood_sets(ring, nodes)
    m = min(nbr, n - 1)
    everyone = np.arange(n)
    for q, row in zip(nodes, got):
        order = np.lexsort((everyone, site, delay[site[q], site]))
        assert row.tolist() == order[order != q][:m].tolist()


@pytest.mark.parametrize("model", ["plane", "sphere"])
def test_cached_class_trees_give_the_same_routing_tables(model, monkeypatch):
    # classes of 64+ nodes stand in for the 65,536-node ones of 1M+ rings: on 20,000 nodes rows 0
    # and 1 keep their trees across batches (and a row-1 class must not get the row-0 tree of the
    # class it starts at)
    ring = small_ring(20_000, model=model, seed=4)
    batches = [ring.order[i:i + 2000] for i in (0, 2000, 9000)]
    monkeypatch.setattr(kernels, "CACHED_TREE_MIN", 1 << 40)
    fresh = [kernels.routing_tables(ring, b) for b in batches]
    monkeypatch.setattr(kernels, "CACHED_TREE_MIN", 64)
    cached = [kernels.routing_tables(ring, b) for b in batches]
    assert kernels._cached(ring, "class_index", dict)          # trees were kept
    for f, c in zip(fresh, cached):
        assert all(np.array_equal(x, y) for x, y in zip(f, c))


def test_small_ring_leaf_set_holds_everyone(spark):
    ring = small_ring(5)
    o = ov.build_overlay(spark, ring, "proximity")
    st = _state(o)
    o.unpersist()
    assert all(sorted(st[x].leaf) == sorted(set(range(5)) - {x}) for x in range(5))
    assert all(len(st[x].nbr) == 4 for x in range(5))


@pytest.mark.parametrize("n, leaf", [(2000, 16), (17, 16), (9, 8), (300, 2)])
def test_leaf_rule_takes_a_key_in_its_range_to_the_closest_of_the_node_and_its_leaf_set(n, leaf):
    ring = small_ring(n, 4, seed=3, leaf=leaf)
    rng = np.random.default_rng(8)
    count, half = 3000, leaf // 2
    at = rng.integers(0, n, count)
    rows = kernels.leaf_window(ring, at)
    # a third of the rows as failure repair pads them: a side cut short repeats its farthest member
    kept = rng.integers(1, half + 1, count)
    for side in (0, half):
        col = np.arange(half)[None, :]
        block = rows[:, side:side + half]
        rows[:, side:side + half] = np.where((col < kept[:, None]) | (np.arange(count) % 3 != 0)[:, None],
                                             block, block[np.arange(count), kept - 1][:, None])
    # keys at and around the window (in and out of range), half way between ring neighbours (ties), random
    ints = node_ints(ring)
    p = ring.pos[at] + rng.integers(-half - 2, half + 3, count)
    a, c = ring.order[p % n], ring.order[(p + 1) % n]
    keys = [ints[x] for x in a[:1000]]
    keys += halfway(ints, a[1000:2000], c[1000:2000])
    keys += int_ids(*ids.random_ids(1000, rng))
    khi, klo = id_arrays(keys)
    in_range, best = kernels.leaf_rule(ring, khi, klo, at, rows)

    def dist(x, k):
        return min((ints[x] - k) % M, (k - ints[x]) % M), ints[x]
    for i, k in enumerate(keys):
        lm, rm = ints[rows[i, half - 1]], ints[rows[i, leaf - 1]]
        assert in_range[i] == ((k - lm) % M <= (rm - lm) % M)
        expect = min({int(at[i]), *rows[i].tolist()}, key=lambda x: dist(x, k)) if in_range[i] else at[i]
        assert best[i] == expect
    assert 0.2 < in_range.mean() < 0.9


def _built_and_routed(spark, n=800):
    """An n-node overlay's state and 1,000 routes (and the level its state was cached at)."""
    ring = small_ring(n, seed=5)
    o = ov.build_overlay(spark, ring, "proximity", seed=5)
    got = o.state.storageLevel
    st = o.state.toPandas().sort_values("id")
    r = ov.route(o, ov.lookups(spark, ring, 1000, 8, None))
    r = r.toPandas().sort_values("mid").reset_index(drop=True)
    o.unpersist()
    return st, r, got


def test_same_seed_gives_identical_state_and_routes(spark):
    (s1, r1, _), (s2, r2, _) = _built_and_routed(spark), _built_and_routed(spark)
    assert [list(x) for x in s1.rt] == [list(x) for x in s2.rt]
    assert r1.equals(r2)


def test_only_a_frame_memory_would_hold_under_a_quarter_of_is_kept_on_disk_alone():
    assert bsp.cache_level(120, 30).useMemory and bsp.cache_level(120, 30).deserialized
    assert not bsp.cache_level(121, 30).useMemory and bsp.cache_level(121, 30).useDisk


def test_a_state_far_larger_than_memory_is_kept_on_disk_with_the_same_state_and_routes(spark, monkeypatch):
    s1, r1, fits = _built_and_routed(spark, 300)
    assert bsp.memory_for_cache(spark) > ov.state_need(small_ring(300, seed=5))
    assert fits.deserialized and fits.useMemory and fits.useDisk
    monkeypatch.setattr(bsp, "memory_for_cache", lambda spark: 1000)
    s2, r2, big = _built_and_routed(spark, 300)
    assert not big.useMemory and big.useDisk
    assert [list(x) for x in s1.rt] == [list(x) for x in s2.rt]
    assert r1.equals(r2)


@pytest.mark.parametrize("b, mode, leaf", [(4, "proximity", 16), (2, "random", 2)])
def test_a_route_reads_each_entry_in_the_join_and_ships_the_tables_only_where_it_is_empty(spark, monkeypatch,
                                                                                         b, mode, leaf):
    from pyspark.sql import functions as F
    ring = small_ring(900, b, seed=4, leaf=leaf)
    o = ov.build_overlay(spark, ring, mode, seed=2)
    rng = np.random.default_rng(3)
    khi, klo = ids.random_ids(1500, rng)
    ints = node_ints(ring)
    want = [closest_brute(ints, key) for key in int_ids(khi, klo)]
    # half start anywhere; half at their key's node, where the key's entry is mostly empty
    src = np.where(np.arange(1500) < 750, rng.integers(0, 900, 1500), want)
    msgs = ov.messages_frame(spark, src, khi, klo)
    # what a superstep ships: the entry at each message's slot, and the tables only where it is empty
    st = {r.id: r for r in o.state.collect()}
    joined = ov.with_slots(msgs, o.ring_bc).join(o.state, F.col("at") == F.col("id"))
    shipped = joined.select(*ov.entry_read()).collect()
    assert len(shipped) == 1500
    for r in shipped:
        key = np.array([r.key_hi]).view(np.uint64), np.array([r.key_lo]).view(np.uint64)
        assert r.slot == kernels.table_slot(ring, *key, np.array([r.at]))[1][0]
        full = st[r.at]
        entry = full.rt[r.slot] if r.slot < len(full.rt) else -1
        assert r.entry == entry
        assert (list(r.rt), list(r.nbr)) == (([], []) if entry >= 0 else (list(full.rt), list(full.nbr)))
    assert 0 < sum(r.entry >= 0 for r in shipped) < 1500
    routed = ov.route(o, msgs).toPandas().sort_values("mid").reset_index(drop=True)
    # the same routes with the whole tables shipped to every message
    whole_read = [F.col(c) for c in msgs.columns + ["slot", "leaf", "rt", "nbr"]]
    monkeypatch.setattr(ov, "entry_read", lambda leaf=True: whole_read)
    monkeypatch.setattr(ov, "with_slots", lambda m, _: m.withColumn("slot", F.lit(-1)))
    whole = ov.route(o, msgs).toPandas().sort_values("mid").reset_index(drop=True)
    o.unpersist()
    assert routed.equals(whole)
    assert list(routed.dest) == want
    assert routed.rare.sum() > 0   # the rare case ran, where the tables were shipped


def test_routing_no_message_returns_an_empty_frame_with_the_delivered_columns(spark, overlay_1500):
    msgs = ov.lookups(spark, overlay_1500.ring, 5, 1, None).limit(0)
    routed = ov.route(overlay_1500, msgs)
    assert routed.columns == ["mid", "src", "key_hi", "key_lo", "dest", "hops", "distance", "rare",
                              "timeouts", "direct"]
    assert routed.count() == 0
    assert not plain_python_tasks(routed)


def test_superstep_progress_is_reported(spark, overlay_1500, progress):
    msgs = ov.lookups(spark, overlay_1500.ring, 200, 1, None)
    ov.route(overlay_1500, msgs)
    assert progress[0].startswith("route superstep 1: ") and "messages in flight" in progress[0]
    assert progress[-1].startswith(f"route superstep {len(progress)}: 0 messages in flight")


@pytest.mark.parametrize("n, b, leaf", [(900, 4, 16), (900, 2, 2), (17, 4, 16), (17, 1, 16), (9, 8, 8)])
def test_a_converged_overlay_delivers_on_a_leaf_set_hop_with_the_rows_of_hop_by_hop_routing(
        spark, progress, monkeypatch, n, b, leaf):
    import dataclasses
    ring = small_ring(n, b, seed=6, leaf=leaf)
    o = ov.build_overlay(spark, ring, "proximity", seed=2)
    assert o.converged
    # keys at nodes, at random, and half way between two nodes in ring order (a tie on distance)
    rng = np.random.default_rng(5)
    khi, klo = ids.random_ids(1500, rng)
    at_node = rng.integers(0, n, 500)
    khi[:500], klo[:500] = ring.hi[at_node], ring.lo[at_node]
    ints = node_ints(ring)
    khi[500:1000], klo[500:1000] = id_arrays(halfway(ints, ring.order[np.arange(500) % n],
                                                     ring.order[(np.arange(500) + 1) % n]))
    msgs = ov.messages_frame(spark, rng.integers(0, n, 1500), khi, klo)

    shipped, step_task, read = [], ov._step_task, ov.entry_read
    monkeypatch.setattr(ov, "entry_read", lambda leaf=True: shipped.append(leaf) or read(leaf))

    def routed(overlay, ahead=True):
        progress.clear()
        monkeypatch.setattr(ov, "_step_task", lambda r, d, settle, a: step_task(r, d, settle, a and ahead))
        rows = ov.route(overlay, msgs).toPandas().sort_values("mid").reset_index(drop=True)
        return rows, [int(line.split(": ")[1].split()[0]) for line in progress]
    settled, settled_flight = routed(o)
    on_leaf_hop, leaf_flight = routed(o, ahead=False)   # a table hop's node waits for the next superstep
    hop_by_hop, hop_flight = routed(dataclasses.replace(o, converged=False))
    o.unpersist()
    assert settled.equals(hop_by_hop) and on_leaf_hop.equals(hop_by_hop)
    keys = int_ids(settled.key_hi.astype(np.uint64), settled.key_lo.astype(np.uint64))
    assert list(settled.dest) == [closest_brute(ints, key) for key in keys]
    # routes whose last hop a leaf set took end a superstep sooner, and one more if a table hop led
    # there; no route ends later
    for fewer, more in ((settled_flight, leaf_flight), (leaf_flight, hop_flight)):
        assert len(fewer) <= len(more)
        assert all(s <= h for s, h in zip(fewer, more))
    assert sum(leaf_flight) < sum(hop_flight)
    if n > 2 * leaf:   # (on a smaller ring every first hop is a leaf-set hop)
        assert sum(settled_flight) < sum(leaf_flight)
    # the leaf sets stay behind where the tasks read them from the ring
    assert shipped == [kernels.whole_ring(ring, n)] * 2 + [True]


def test_graphframe_view_is_optional_and_explains_what_is_missing(spark, overlay_1500, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_graphframes(name, *args, **kwargs):
        if name.startswith("graphframes"):
            raise ImportError("No module named 'graphframes'")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_graphframes)
    with pytest.raises(RuntimeError, match="--packages io.graphframes"):
        overlay_1500.as_graphframe()
    # the same data in GraphFrame layout, without the package
    edges = overlay_1500.routing_edges()
    assert edges.columns == ["src", "dst", "row", "col"] and "id" in overlay_1500.state.columns


@pytest.mark.parametrize("model", ["plane", "transit-stub"])
def test_the_members_state_is_the_converged_state_of_the_members_alone_by_brute_force(model):
    ring = small_ring(600, model=model, seed=4)
    members = np.sort(np.random.default_rng(4).choice(ring.n, 420, replace=False))
    absent = np.setdiff1d(np.arange(ring.n), members)
    nodes = members[::7]
    leaf, rt, nbr = kernels.member_states(kernels.members_ring(ring, members), members, nodes)
    ints = node_ints(ring)
    order = sorted(members.tolist(), key=lambda i: ints[i])
    for x, lx, tx, mx in zip(nodes.tolist(), leaf, rt, nbr):
        p = order.index(x)
        assert list(lx) == [order[(p - k) % len(order)] for k in range(1, 9)] + \
            [order[(p + k) % len(order)] for k in range(1, 9)]
        d = ring.prox.dist(np.full(ring.n, x), np.arange(ring.n))
        d[absent], d[x] = np.inf, np.inf
        assert sorted(d[list(mx)]) == pytest.approx(np.sort(d)[:32])
        # every slot: the nearest member in its class, or empty when the class has no member
        classes: dict[tuple[int, int], list[int]] = {}
        for y in members.tolist():
            if y != x:
                r = (128 - (ints[x] ^ ints[y]).bit_length()) // 4
                classes.setdefault((r, (ints[y] >> (128 - 4 * (r + 1))) & 15), []).append(y)
        assert not np.isin(tx, absent).any()
        for slot, e in enumerate(tx.tolist()):
            cands = classes.get((slot // 16, slot % 16), [])
            assert (e >= 0) == bool(cands)
            if cands:
                assert d[e] == pytest.approx(d[cands].min())
        assert all(r < len(tx) // 16 for r, _ in classes)
    with pytest.raises(ValueError, match="one of the members"):
        kernels.member_states(kernels.members_ring(ring, members), members, absent[:3])
