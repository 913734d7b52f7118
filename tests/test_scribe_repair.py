"""Scribe tree repair (S3): superstep repair against a sequential Scribe, the event stream, the job."""
import numpy as np
import pandas as pd
import pytest

from scribe_spark.experiments import scribe_repair as rx
from scribe_spark.pastry import failures as fl
from scribe_spark.pastry import overlay as ov
from scribe_spark.reference import closest
from scribe_spark.reference.sequential_scribe import SequentialScribe
from scribe_spark.scribe import reliable
from scribe_spark.scribe import repair as rp
from scribe_spark.scribe import topics as tp
from scribe_spark.scribe import trees as tr
from tests.helpers import adaptive_execution_off, small_ring


@pytest.fixture(scope="module")
def broken(spark):
    """700 nodes (b=2, |L|=8), 20 topics of 1..70 subscribers; 15% fail, including 4 roots.

    The repair runs without adaptive execution: Spark then misses cached frames more often, and
    the repair must still find the local checkpoints behind them.
    """
    ring = small_ring(700, b=2, leaf=8, nbr=8, seed=31)
    rng = np.random.default_rng(32)
    overlay = ov.build_overlay(spark, ring, "proximity", seed=1)
    topics = tp.create([f"r{i}" for i in range(20)], ["c"] * 20, secret=3)
    sizes = np.concatenate([[1, 70], rng.integers(2, 40, 18)])
    sub_t = np.repeat(np.arange(20), sizes)
    sub_n = np.concatenate([rng.choice(ring.n, s, replace=False) for s in sizes])
    subs = tr.subscriptions_frame(spark, sub_t, sub_n)
    trees = tr.subscribe(overlay, topics, subs)
    roots = trees.roots.toPandas().set_index("topic").node.reindex(range(20)).to_numpy()
    dead = np.zeros(ring.n, dtype=bool)
    dead[roots[[1, 3, 5, 7]]] = True
    dead[rng.choice(ring.n, 100, replace=False)] = True
    repaired, _ = fl.repair(overlay, dead)
    last = spark.createDataFrame(pd.DataFrame({"topic": np.arange(20), "last": np.full(20, 7)}))
    sets = rp.replicas(ring, overlay.state.select("id", "leaf").toPandas(), topics,
                       {t: roots[t] for t in np.flatnonzero(dead[roots])}, 5)
    with adaptive_execution_off(spark):   # where Spark missed cached members and needed their checkpoints
        fixed = rp.repair_trees(repaired, topics, trees, subs, dead, sets, upcalls=rp.reliable(last))
    def state(o):
        return {r.id: (list(r.leaf), list(r.rt), list(r.nbr)) for r in o.state.collect()}
    yield dict(ring=ring, topics=topics, sub_t=sub_t, sub_n=sub_n, subs=subs, trees=trees, roots=roots,
               dead=dead,
               sets=sets, fixed=fixed, repaired=repaired, state=state(overlay), state_after=state(repaired))
    overlay.unpersist()


def _edges(df):
    return set(map(tuple, df.toPandas()[["topic", "src", "dst"]].itertuples(index=False)))


def test_superstep_repair_equals_sequential_scribe(broken):
    seq = SequentialScribe(broken["ring"], broken["state"], broken["topics"])
    for t, n in zip(broken["sub_t"], broken["sub_n"]):
        seq.subscribe(int(t), int(n))
    assert seq.edges() == _edges(broken["trees"].edges)
    seq.fail(set(map(int, np.flatnonzero(broken["dead"]))), broken["state_after"])
    fixed = broken["fixed"]
    assert _edges(fixed.trees.edges) == seq.edges()
    roots = dict(map(tuple, fixed.trees.roots.toPandas()[["topic", "node"]].itertuples(index=False)))
    assert roots == seq.roots
    assert fixed.counts["orphans"] > 0 and fixed.counts["root_failovers"] >= 4


def test_reliable_upcalls_carry_the_last_number_to_every_graft_point(broken):
    fixed = broken["fixed"]
    asked = fixed.handled.toPandas()
    assert len(asked) == fixed.counts["grafts"] > 0
    assert (asked.above == 7).all()                  # the fault handler's number, through every collapse
    hops = set(map(tuple, fixed.grafts.toPandas()[["topic", "src", "dst"]].itertuples(index=False)))
    assert set(map(tuple, asked[["topic", "child", "sender"]].itertuples(index=False))) <= hops
    assert not broken["dead"][asked.sender].any()


def test_an_application_forward_handler_can_change_and_stop_repair_subscribes(spark, broken):
    from pyspark.sql import functions as F
    fixed, roots, dead = broken["fixed"], broken["roots"], broken["dead"]
    grafted = fixed.handled.toPandas().topic.value_counts()
    stop = int([t for t in grafted.index if not dead[roots[t]]][0])   # a live root's topic with grafts
    def forward(m):
        return m.where(F.col("topic") != stop).withColumn("last", F.greatest("last", F.lit(50)))
    custom = rp.Upcalls(fault=rp.plain_fault, forward=forward, subscribe=rp.retransmissions)
    out = rp.repair_trees(broken["repaired"], broken["topics"], broken["trees"], broken["subs"],
                          broken["dead"],
                          broken["sets"], upcalls=custom)
    asked = out.handled.toPandas()
    assert (asked.above == 50).all() and stop not in set(asked.topic)
    def edges(r, keep):
        return {e for e in _edges(r.trees.edges) if keep(e[0])}
    assert edges(out, lambda t: t != stop) == edges(fixed, lambda t: t != stop)
    assert edges(out, lambda t: t == stop) < edges(fixed, lambda t: t == stop)   # its orphans stay cut off


def test_repaired_trees_have_live_nodes_true_roots_and_reach_every_live_subscriber(broken):
    ring, dead, topics, fixed = broken["ring"], broken["dead"], broken["topics"], broken["fixed"]
    edges = fixed.trees.edges.toPandas()
    assert not dead[edges.src].any() and not dead[edges.dst].any()
    roots = fixed.trees.roots.toPandas().set_index("topic").node
    want = closest.closest_live(ring, ~dead, topics.hi, topics.lo)
    assert all(roots[t] == want[t] for t in roots.index)
    parent = {(t, c): p for t, c, p in edges[["topic", "src", "dst"]].itertuples(index=False)}
    assert len(parent) == len(edges)
    for t, s in zip(broken["sub_t"], broken["sub_n"]):
        if dead[s]:
            continue
        node, seen = int(s), set()
        while (t, node) in parent:
            assert node not in seen
            seen.add(node)
            node = parent[(t, node)]
        assert node == roots[t]
    # failover rows: old roots dead, new roots the closest live nodes
    fo = fixed.failover
    assert dead[fo.old_root.to_numpy()].all() and (fo.new_root.to_numpy() == want[fo.topic.to_numpy()]).all()
    assert fo.replicated.all()      # some of the 5 replicas nearest each topicId survive here


def _stream():
    """Topic 0: root alive, nodes 10 (joined during the outage) and 11 (cut off); topic 1: root dead."""
    pub = np.ones((3, 8), dtype=bool)
    subs = pd.DataFrame({"topic": [0, 0, 1, 1, 2], "node": [10, 11, 12, 13, 14],
                         "joined": [True, False, False, False, False]})
    root_dead = np.array([False, True, True])
    lost = np.array([False, False, True])
    return pub, subs, root_dead, lost


def test_stream_plain_loses_the_outage_for_cut_off_and_dead_root_subscribers():
    pub, subs, root_dead, lost = _stream()
    log = reliable.deliveries(pub, subs, root_dead, lost, fail_round=2, timeout=3, buffer=8, reliable=False)
    got = log.groupby("node").event.apply(set)
    assert got[10] == set(range(8))
    assert got[11] == got[12] == got[13] == {0, 1, 5, 6, 7}
    assert got[14] == {0, 1}                     # topic 2 lost its root state
    m = rx.measure(log, pub, subs, 2, 3).set_index("phase")
    assert m.loc["during", "delivered"] == 3 and m.loc["during", "expected"] == 15
    assert m.loc["before", "delivery_ratio"] == 1 and m.out_of_order_deliveries.sum() == 0


def test_stream_reliable_recovers_everything_in_order_when_the_buffer_covers_the_outage():
    pub, subs, root_dead, lost = _stream()
    log = reliable.deliveries(pub, subs, root_dead, lost, fail_round=2, timeout=3, buffer=8, reliable=True)
    for node in (10, 11, 12, 13):
        mine = log[log.node == node]
        assert list(mine.event) == list(range(8)) and (np.diff(mine.seq) == 1).all()
    late = log[(log.node == 11) & (log["round"] > log.published)]
    assert list(late.event) == [2, 3, 4] and (late["round"] == 5).all()
    m = rx.measure(log, pub, subs, 2, 3).set_index("phase")
    assert m.loc["during", "subscribers_with_loss"] == 1     # only topic 2's subscriber
    assert m.out_of_order_deliveries.sum() == 0


def test_stream_small_buffer_loses_what_it_cannot_hold_and_the_order_check_can_fail():
    pub, subs, root_dead, lost = _stream()
    log = reliable.deliveries(pub, subs, root_dead, lost, fail_round=2, timeout=3, buffer=1, reliable=True)
    assert set(log[log.node == 11].event) == {0, 1, 4, 5, 6, 7}
    swapped = log.copy()
    i = swapped.index[swapped.node == 10][:2]
    cols = ["event", "seq", "published", "round"]
    swapped.loc[i[::-1], cols] = swapped.loc[i, cols].to_numpy()
    m = rx.measure(swapped, pub, subs, 2, 3)
    assert m.out_of_order_subscribers.sum() == 1


@pytest.mark.slow
def test_scribe_repair_job(tiny):
    folder = tiny("scribe_repair")
    t = pd.read_csv(folder / "repair.csv").set_index(["mode", "phase"])
    info = pd.read_csv(folder / "tree_repair.csv").iloc[0]
    assert info.failed_roots >= 3 and info.disconnected_subscribers > 0
    assert t.loc[("plain", "before"), "delivery_ratio"] == 1.0
    assert t.loc[("plain", "during"), "delivery_ratio"] < 1.0
    assert info.topics_lost == 0               # this seed fails no root together with all its replicas
    assert (t.loc["reliable"].delivery_ratio == 1.0).all()
    assert t.loc[("reliable", "during"), "late_deliveries"] > 0
    assert (t.out_of_order_deliveries == 0).all()
    assert (folder / "delivery_by_round.png").stat().st_size > 0 and (folder / "summary.md").exists()
