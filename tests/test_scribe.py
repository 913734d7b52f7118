"""Scribe trees: superstep construction against a sequential Scribe, and the metrics."""
import hashlib

import numpy as np
import pandas as pd
import pytest

from scribe_spark import ids, topology
from scribe_spark.config import ScribeParams
from scribe_spark.pastry import overlay as ov
from scribe_spark.pastry.kernels import Ring
from scribe_spark.reference.closest import closest_live
from scribe_spark.reference.sequential_scribe import SequentialScribe
from scribe_spark.reference.tree_shape import CHECKS, tree_faults
from scribe_spark.scribe import metrics
from scribe_spark.scribe import topics as tp
from scribe_spark.scribe import trees as tr
from scribe_spark.workloads import scribe_groups
from tests.helpers import closest_brute, int_ids, node_ints


@pytest.fixture(scope="module")
def world(spark):
    """A 1,500-node overlay on a small transit-stub network with 25 topics of 1..60 subscribers."""
    rng = np.random.default_rng(21)
    routers = topology.transit_stub(rng, transit_domains=3, stubs_per_transit_router=4)
    n = 1500
    hi, lo = ids.random_ids(n, rng)
    ring = Ring(hi, lo, 4, 16, 32, topology.on_sites("transit-stub", n, routers.delay, 1.0, rng, False))
    o = ov.build_overlay(spark, ring, "proximity", seed=2)
    topics = tp.create([f"t{i}" for i in range(25)], [f"c{i % 4}" for i in range(25)], secret=5)
    sizes = np.concatenate([[1], rng.integers(2, 60, 24)])
    sub_t = np.repeat(np.arange(25), sizes)
    sub_n = np.concatenate([rng.choice(n, s, replace=False) for s in sizes])
    subs = tr.subscriptions_frame(spark, sub_t, sub_n)
    trees = tr.subscribe(o, topics, subs)
    state = {r.id: (list(r.leaf), list(r.rt), list(r.nbr)) for r in o.state.collect()}
    yield dict(ring=ring, overlay=o, topics=topics, sub_t=sub_t, sub_n=sub_n, subs=subs, trees=trees,
               state=state, routers=routers, rng=rng)
    o.unpersist()


def _edges(df):
    return set(map(tuple, df.toPandas()[["topic", "src", "dst"]].itertuples(index=False)))


def test_topic_id_is_sha1_of_name_and_creator():
    hi, lo = tp.topic_id("news", "alice")
    d = hashlib.sha1(b"newsalice").digest()
    assert (hi << 64 | lo) == int.from_bytes(d[:16], "big")


def test_superstep_trees_equal_sequential_scribe(world):
    seq = SequentialScribe(world["ring"], world["state"], world["topics"])
    for i in world["rng"].permutation(len(world["sub_t"])):   # any order gives the same trees
        seq.subscribe(int(world["sub_t"][i]), int(world["sub_n"][i]))
    assert _edges(world["trees"].edges) == seq.edges()
    roots = dict(map(tuple, world["trees"].roots.toPandas()[["topic", "node"]].itertuples(index=False)))
    assert roots == seq.roots


@pytest.mark.slow
def test_trees_on_an_overlay_grown_by_joins_equal_sequential_scribe(world, spark):
    """On a joined overlay (not every entry the nearest node) the supersteps still follow its state."""
    from scribe_spark.pastry import joins
    grown, _ = joins.grow(spark, world["ring"], 300, 600, np.random.default_rng(5), "rows")
    state = {r.id: (list(r.leaf), list(r.rt), list(r.nbr)) for r in grown.state.collect()}
    assert state != world["state"]          # a different overlay from the converged one
    trees = tr.subscribe(grown, world["topics"], world["subs"])
    seq = SequentialScribe(world["ring"], state, world["topics"])
    for t, s in zip(world["sub_t"], world["sub_n"]):
        seq.subscribe(int(t), int(s))
    assert _edges(trees.edges) == seq.edges()
    ints = node_ints(world["ring"])
    roots = trees.roots.toPandas().set_index("topic").node
    assert all(roots[t] == closest_brute(ints, key)
               for t, key in enumerate(int_ids(world["topics"].hi, world["topics"].lo)))
    grown.unpersist()


def test_roots_are_numerically_closest_and_trees_are_acyclic(world):
    ring, topics = world["ring"], world["topics"]
    roots = world["trees"].roots.toPandas().set_index("topic").node
    ints = node_ints(ring)
    for t, key in enumerate(int_ids(topics.hi, topics.lo)):
        assert roots[t] == closest_brute(ints, key)
    parent = {(t, c): p for t, c, p in _edges(world["trees"].edges)}
    assert len(parent) == len(_edges(world["trees"].edges))  # one parent per (topic, child)
    for t, s in zip(world["sub_t"], world["sub_n"]):
        node, seen = int(s), set()
        while (t, node) in parent:       # every subscriber reaches its root without a cycle
            assert node not in seen
            seen.add(node)
            node = parent[(t, node)]
        assert node == roots[t]


def test_tree_shape_oracle_passes_the_superstep_trees(world):
    t = world["topics"]
    faults = tree_faults(world["ring"], t.hi, t.lo, np.arange(t.n), world["trees"].edges.toPandas(),
                         world["trees"].roots.toPandas(), world["sub_t"], world["sub_n"])
    assert faults == dict.fromkeys(CHECKS, 0)


def test_tree_shape_oracle_finds_each_kind_of_broken_tree():
    """Hand-built trees for two topics on 40 nodes; each break is found (with what follows from it)."""
    rng = np.random.default_rng(3)
    hi, lo = ids.random_ids(40, rng)
    ring = Ring(hi, lo, 4, 16, 32, topology.plane(40, rng))
    khi, klo = ids.random_ids(2, rng)
    root = closest_live(ring, np.ones(40, dtype=bool), khi, klo)
    others = [n for n in range(40) if n not in root][:8]
    a, b, c, d, e, f, g, h = others        # topic 0: a -> b -> root, c -> root; topic 1: d -> e -> f -> root
    good = pd.DataFrame({"topic": [0, 0, 0, 1, 1, 1], "src": [a, b, c, d, e, f],
                         "dst": [b, root[0], root[0], e, f, root[1]]})
    roots = pd.DataFrame({"topic": [0, 1], "node": root})
    sub_t, sub_n = np.array([0, 0, 1, 1]), np.array([a, c, d, root[1]])

    def faults(edges=good, rts=roots, st=sub_t, sn=sub_n) -> dict[str, int]:
        return {k: v for k, v in tree_faults(ring, khi, klo, [0, 1], edges, rts, st, sn).items() if v}

    def with_edges(*rows) -> pd.DataFrame:
        return pd.concat([good, pd.DataFrame(rows, columns=["topic", "src", "dst"])], ignore_index=True)

    assert faults() == {}
    cycle = good.copy()
    cycle.loc[5, "dst"] = d                                   # topic 1: d -> e -> f -> d
    assert faults(cycle) == {"unreached": 3}
    assert faults(with_edges((0, a, c))) == {"two_parents": 1}
    assert faults(with_edges((0, a, c), (0, a, root[0]))) == {"two_parents": 1}   # counted per node
    assert faults(with_edges((0, a, b))) == {}                                     # a repeated edge
    assert faults(with_edges((1, g, 40))) == {"bad_ids": 1}                         # no node 40
    assert faults(st=np.append(sub_t, 1), sn=np.append(sub_n, -1)) == {"bad_ids": 1}
    assert faults(with_edges((1, root[1], g))) == {"root_has_parent": 1, "unreached": 4}
    assert faults(good.drop(index=1)) == {"unreached": 1}     # b lost its parent: a ends at b
    assert faults(st=np.append(sub_t, 0), sn=np.append(sub_n, h)) == {"missing_subscribers": 1,
                                                                       "unreached": 1}
    wrong = pd.DataFrame({"topic": [0, 1], "node": [root[0], g]})
    lost = {"wrong_root": 1, "unreached": 4, "missing_subscribers": 1}   # subscriber root[1] is no root now
    assert faults(rts=wrong) == lost
    assert faults(rts=pd.concat([roots, wrong.iloc[1:]])) == {"roots": 1}
    assert faults(rts=roots.iloc[:1]) == {"roots": 1, **lost}


def test_unsubscribe_prunes_like_sequential_scribe(world, spark):
    seq = SequentialScribe(world["ring"], world["state"], world["topics"])
    for t, s in zip(world["sub_t"], world["sub_n"]):
        seq.subscribe(int(t), int(s))
    leave = world["rng"].choice(len(world["sub_t"]), len(world["sub_t"]) // 3, replace=False)
    for i in leave:
        seq.unsubscribe(int(world["sub_t"][i]), int(world["sub_n"][i]))
    leaving = tr.subscriptions_frame(spark, world["sub_t"][leave], world["sub_n"][leave])
    after = tr.unsubscribe(world["trees"], world["subs"], leaving)
    assert _edges(after.edges) == seq.edges()
    assert len(seq.edges()) < len(_edges(world["trees"].edges))


def test_delays_depths_and_stress_against_direct_computation(world):
    o, ring, trees = world["overlay"], world["ring"], world["trees"]
    paths = metrics.tree_paths(o, trees).toPandas()
    edges = trees.edges.toPandas()
    parent = {(t, c): p for t, c, p in edges[["topic", "src", "dst"]].itertuples(index=False)}
    roots = trees.roots.toPandas().set_index("topic").node
    for t, node, delay, depth in paths[["topic", "node", "delay", "depth"]].itertuples(index=False):
        d, k, x = 0.0, 0, node
        while (t, x) in parent:
            d += ring.prox.dist(np.array([x]), np.array([parent[(t, x)]]))[0]
            x, k = parent[(t, x)], k + 1
        assert x == roots[t] and depth == k and delay == pytest.approx(d)
    delay = metrics.delay_penalty(o, trees, metrics.tree_paths(o, trees),
                                  world["subs"]).toPandas().set_index("topic")
    assert (delay.rmd.dropna() >= 1.0 - 1e-9).all()   # a tree path is never shorter than the direct path
    stress = metrics.node_stress(trees).toPandas().set_index("node")
    counts = edges.groupby("dst").size()
    assert (stress.entries.sort_index() == counts.sort_index()).all()
    # the counts per value the job gathers instead of a row per node
    got = metrics.node_stress_counts(trees).toPandas()
    for key in ("topics", "entries"):
        vals, cnt = np.unique(stress[key].to_numpy(), return_counts=True)
        mine = got[got.metric == key].sort_values("value")
        assert mine["value"].tolist() == vals.tolist() and mine["nodes"].tolist() == cnt.tolist()


def test_link_stress_against_per_edge_walk(world):
    o, trees, routers = world["overlay"], world["trees"], world["routers"]
    out = metrics.link_stress(o, routers, trees, world["subs"])
    site = world["ring"].prox.site
    li = routers.link_index()
    edges = trees.edges.toPandas()
    want = np.zeros(len(routers.edges), dtype=np.int64)
    for child, parent in edges[["src", "dst"]].itertuples(index=False):   # one path at a time
        a, v = site[parent], site[child]
        while v != a:
            p = routers.pred[a, v]
            want[li[p, v] - 1] += 1
            v = p
    got = np.zeros_like(want)
    got[out["scribe"].link.to_numpy()] = out["scribe"].copies.to_numpy()
    assert (got == want).all()
    # IP multicast: each topic's shortest-path tree uses a link at most once
    roots = trees.roots.toPandas().set_index("topic").node
    ip = np.zeros_like(want)
    for t in range(world["topics"].n):
        used = set()
        for s in world["sub_n"][world["sub_t"] == t]:
            a, v = site[roots[t]], site[s]
            while v != a:
                p = routers.pred[a, v]
                used.add(li[p, v] - 1)
                v = p
        for link in used:
            ip[link] += 1
    got_ip = np.zeros_like(ip)
    got_ip[out["ip_multicast"].link.to_numpy()] = out["ip_multicast"].copies.to_numpy()
    assert (got_ip == ip).all()


def test_wrong_credentials_are_refused_and_counted(spark):
    topics = tp.create(["a", "b"], ["x", "y"], secret=1)
    cred = topics.cred_numbers()
    assert all(f"{c:016x}" == s for c, s in zip(cred.view(np.uint64), topics.cred))
    accepted, refused = tp.admit(spark, topics, np.array([0, 1, 1, 0]), np.array([5, 6, 7, 8]),
                                 [cred[0], cred[1], tp.forged(cred)[1], cred[1]])
    assert refused == 2
    got = sorted(map(tuple, accepted.toPandas()[["topic", "node"]].itertuples(index=False)))
    assert got == [(0, 5), (1, 6)]


def test_group_sizes_follow_the_rank_formula():
    p = ScribeParams(nodes=100_000, topics=1500)
    s = scribe_groups.group_sizes(p)
    assert s[0] == 100_000 and s[1] == int(100_000 * 2 ** -1.25 + 0.5) and s[-1] == 11
    assert (scribe_groups.group_sizes(ScribeParams(nodes=50, topics=7, group_size=11)) == 11).all()
