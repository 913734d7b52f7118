"""Scribe events in simulated time: superstep delivery down the trees against a sequential heap of copies."""
from __future__ import annotations

import math
import operator
from functools import reduce

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from scribe_spark.pastry import overlay as ov
from scribe_spark.reference import timed_events as ref
from scribe_spark.reference.closest import closest_live
from scribe_spark.reference.sequential_scribe import SequentialScribe
from scribe_spark.scribe import timed as scribe_timed
from scribe_spark.scribe import topics as tp
from scribe_spark.scribe import trees as tr
from scribe_spark.spark.arrow import local_frame
from tests.helpers import small_ring


@pytest.fixture(scope="module")
def world(spark):
    """A 300-node overlay with 3 topics of 40 subscribers, its Scribe trees and a sequential Scribe's."""
    ring = small_ring(300, seed=4)
    o = ov.build_overlay(spark, ring, seed=2)
    topics = tp.create(["a", "b", "c"], ["x", "y", "z"], secret=1)
    rng = np.random.default_rng(3)
    sub_t = np.repeat(np.arange(3), 40)
    sub_n = np.concatenate([rng.choice(300, 40, replace=False) for _ in range(3)])
    trees = tr.subscribe(o, topics, tr.subscriptions_frame(spark, sub_t, sub_n))
    state = {r.id: (list(r.leaf), list(r.rt), list(r.nbr)) for r in o.state.collect()}
    seq = SequentialScribe(ring, state, topics)
    for t, v in zip(sub_t.tolist(), sub_n.tolist()):
        seq.subscribe(t, v)
    yield ring, o, trees, seq
    for frame in (trees.edges, trees.members, trees.roots):
        frame.unpersist()
    o.unpersist()


def test_events_go_down_the_trees_at_the_link_delays_and_stop_where_a_node_went_down(spark, world):
    """On a 300-node overlay with 3 topics of 40 subscribers, events start at their roots (and one at a node
    that is not its root) and go down the trees. A forwarder that went down before a copy arrives drops it
    and its subtree's, one that goes down at the very time a copy arrives too, and so does the end of the
    run; the Spark supersteps give the sequential reference's copies, to the last bit of their times. The
    heartbeats per bin and the heartbeat timeouts in closed form are those the reference sends and times
    one by one: only the children of a parent that went declare it, within a link and a timeout of its
    going. With a forward upcall that stops the odd events below the roots, both engines agree on fewer
    copies and more heartbeats."""
    ring, o, trees, seq = world
    link = lambda u, v: float(ring.prox.dist([u], [v])[0])   # noqa: E731
    # topic 0's busiest forwarder other than the root goes down at 20 s, between events 0 and 1 (a path
    # down a tree takes under 10 s: a link is at most 1,415 ms on the plane); a child of topic 1's root
    # goes down at the very time the root's copy of event 2 reaches it
    fan = {k: len(c) for k, c in seq.children.items() if k[0] == 0 and k[1] != seq.roots[0]}
    cut = max(sorted(fan), key=fan.get)[1]
    root1 = seq.roots[1]
    child = min(seq.children[(1, root1)] - {cut})
    t2 = 30_000.0
    tie = t2 + link(root1, child) + 1.0
    gone = {cut: 20_000.0, child: tie}
    starts = [(0, 0, seq.roots[0], 500.0), (1, 0, seq.roots[0], 25_000.0), (2, 1, root1, t2),
              (3, 2, seq.roots[2], 60_000.0), (4, 2, min(set(range(300)) - {seq.roots[2]}), 100.0)]
    until = 60_000.0 + 3.0   # event 3 reaches its root and none of its children (every link > 2 ms)
    want = pd.DataFrame(ref.deliver(seq, starts, link, 1.0, gone, until), columns=["event", "node", "t"])
    at_root = local_frame(spark, pd.DataFrame(starts, columns=["event", "topic", "node", "t"]),
                          "event long, topic long, node long, t double")
    left = local_frame(spark, pd.DataFrame({"node": list(gone), "t_gone": list(gone.values())}),
                       "node long, t_gone double")
    hb = scribe_timed.Heartbeats(3000.0, 6000.0, 5, 1.0, until, 10_000.0)
    got, beats, outs = _spark(o, trees, at_root, left, hb, None)
    # a forward upcall: below the roots, odd events go no further
    roots = sorted(seq.roots.items())
    at_its_root = reduce(operator.or_, [(F.col("topic") == t) & (F.col("node") == v) for t, v in roots])
    odd = _spark(o, trees, at_root, left, hb, (F.col("event") % 2 == 0) | at_its_root)
    key = ["event", "node"]
    assert got.sort_values(key).reset_index(drop=True).equals(want.sort_values(key).reset_index(drop=True))
    # heartbeats and their timeouts in closed form: those the reference sends and times one by one
    phase = lambda v: float(hb.phase(np.array([v]))[0])   # noqa: E731
    sim = ref.TimedEvents(seq, link, 1.0, gone, until, 3000.0, 6000.0, phase).run(starts)
    assert sim.copies == ref.deliver(seq, starts, link, 1.0, gone, until)
    at = np.minimum(np.asarray(sim.heartbeats) // 10_000.0, 6).astype(int)
    assert beats.tolist() == np.bincount(at, minlength=7).tolist()
    assert sorted(outs.drop(columns="t_gone").itertuples(index=False, name=None)) == sorted(sim.detections)
    def even(event: int, topic: int, u: int, _t: float) -> bool:
        return event % 2 == 0 or u == seq.roots[topic]
    held = ref.TimedEvents(seq, link, 1.0, gone, until, 3000.0, 6000.0, phase, even).run(starts)
    assert sorted(odd[0].itertuples(index=False, name=None)) == sorted(held.copies)
    at = np.minimum(np.asarray(held.heartbeats) // 10_000.0, 6).astype(int)
    assert odd[1].tolist() == np.bincount(at, minlength=7).tolist() and odd[1].sum() > beats.sum()
    assert sorted(odd[2].drop(columns="t_gone").itertuples(index=False, name=None)) == sorted(held.detections)
    reached = {e for e, _v, _t in sim.copies}   # every event still reaches its root, at least
    assert len(held.copies) < len(sim.copies) and {e for e, _v, _t in held.copies} == reached
    quiet = ref.TimedEvents(seq, link, 1.0, gone, until, 3000.0, 6000.0, phase).run([])
    assert len(quiet.heartbeats) > len(sim.heartbeats)   # events spared some heartbeats
    # the children of the nodes that went noticed within T_hbf of their parent's last message, nobody else
    parents = {p for p in gone if any(seq.children[key] for key in seq.children if key[1] == p)}
    assert {p for _t, p, _c, _t in sim.detections} == parents and cut in parents
    assert all(gone[p] < t <= gone[p] + 1415.0 + 1.0 + 6000.0 for _t, p, _c, t in sim.detections)
    n = want.groupby("event").size()
    below = _subtree(seq, 0, cut)
    assert n[0] == n[1] + len(below) and len(below) > 1      # before the crash, the whole tree; after, not
    assert child not in set(want.node[want.event == 2]) and n[2] < _size(seq, 1)   # arrived as it went
    assert n[3] == 1 and 4 not in set(want.event)           # the end of the run; a route that missed the root
    t = want.set_index(key).t
    for (topic, parent), kids in seq.children.items():      # each copy: its parent's time plus one link
        for c in kids if topic == 0 else ():
            if (0, parent) in t.index and (0, c) in t.index:
                assert t[(0, c)] == t[(0, parent)] + link(parent, c) + 1.0


def test_subscribes_graft_the_orphans_back_move_the_root_and_refuse_a_loop(spark, world):
    """SUBSCRIBEs change the trees in time, and the Spark trees in time agree with the reference that
    processes each SUBSCRIBE hop on its heap. Topic 0's busiest forwarder goes down at 20 s and comes back
    at 40 s; topic 1's root goes down at 15 s for good. Each child that noticed its parent gone (in a run
    without SUBSCRIBEs) re-subscribes then, along its route, which ends at the live node closest to the
    topicId when it would meet a dead node; the forwarder re-subscribes at its return, and a child of topic
    2 sends a SUBSCRIBE that reaches its own child, which would close a loop. Both engines give the same
    copies, heartbeats per bin and timeouts; the events after the repairs reach the orphans again, topic
    1's reach them from the new root, but only from the delivery of the SUBSCRIBE that made it one (that
    node first sent it on to a dead node), and the loop is refused."""
    ring, o, trees, seq = world
    link = lambda u, v: float(ring.prox.dist([u], [v])[0])   # noqa: E731
    fan = {k: len(c) for k, c in seq.children.items() if k[0] == 0 and k[1] != seq.roots[0]}
    cut = max(sorted(fan), key=fan.get)[1]
    root1 = seq.roots[1]
    spans = [(cut, 20_000.0, 40_000.0), (root1, 15_000.0, math.inf)]
    gone = {cut: 20_000.0, root1: 15_000.0}
    until = 70_000.0
    hb = scribe_timed.Heartbeats(3000.0, 6000.0, 5, 1.0, until, 10_000.0)
    phase = lambda v: float(hb.phase(np.array([v]))[0])   # noqa: E731
    noticed = ref.TimedEvents(seq, link, 1.0, gone, until, 3000.0, 6000.0, phase).run([]).detections
    subs = [(k, topic, path, path[-1][1]) for k, (topic, _p, c, t) in
            enumerate(sorted(noticed, key=lambda d: (d[3], d[2])))
            for path in [_route(ring, seq, topic, c, t, link, spans)]]
    path = _route(ring, seq, 0, cut, 41_000.0, link, spans)
    subs.append((len(subs), 0, path, path[-1][1]))
    top = seq.roots[2]
    mid = min(c for c in seq.children[(2, top)] if seq.children.get((2, c)))
    low = min(seq.children[(2, mid)])
    subs.append((len(subs), 2, [(mid, 50_000.0), (low, 50_000.0 + link(mid, low) + 1.0)], None))
    # topic 1's first SUBSCRIBE is delivered at its last node only 700 ms after its last hop (that node sent
    # it on to a dead node first): an event there in between is lost, the node not yet a root
    new_root = subs[next(k for k, (_k, topic, *_r) in enumerate(subs) if topic == 1)][2][-1][0]
    there = [k for k, (_k, topic, path, _d) in enumerate(subs) if topic == 1 and path[-1][0] == new_root]
    first = min(there, key=lambda k: subs[k][2][-1][1])
    reached = subs[first][2][-1][1]
    subs[first] = (*subs[first][:3], reached + 700.0)
    assert all(subs[k][3] > reached + 1.0 for k in there)
    starts = [(0, 0, seq.roots[0], 500.0), (1, 0, seq.roots[0], 25_000.0), (2, 0, seq.roots[0], 60_000.0),
              (3, 1, root1, 10_000.0), (4, 1, new_root, 50_000.0), (5, 2, top, 55_000.0),
              (6, 1, new_root, reached + 1.0)]
    sim = ref.TimedEvents(seq, link, 1.0, gone, until, 3000.0, 6000.0, phase,
                          spans=spans).run(starts, subscribes=subs)
    left = local_frame(spark, pd.DataFrame({"node": list(gone), "t_gone": list(gone.values())}),
                       "node long, t_gone double")
    hops = pd.DataFrame([(topic, k, i, v, t, math.nan if done is None else done)
                         for k, topic, path, done in subs for i, (v, t) in enumerate(path)],
                        columns=["topic", "path", "i", "node", "t", "t_done"])
    paths = local_frame(spark, hops, "topic long, path long, i long, node long, t double, t_done double")
    outages = pd.DataFrame(spans, columns=["node", "down", "up"])
    at_root = local_frame(spark, pd.DataFrame(starts, columns=["event", "topic", "node", "t"]),
                          "event long, topic long, node long, t double")
    timed = scribe_timed.grafted(o, scribe_timed.at_start(trees, left), paths, outages, 1.0)
    try:
        got, beats, outs = _on(o, timed, at_root, hb, None)
        loop = timed.edges.filter((F.col("topic") == 2) & (F.col("src") == mid) & (F.col("dst") == low))
        loop = loop.count()
    finally:
        for frame in timed.frames():
            frame.unpersist()
    assert sorted(got.itertuples(index=False, name=None)) == sorted(sim.copies)
    assert beats.tolist() == hb.bins.count(sim.heartbeats).tolist()
    assert sorted(outs.drop(columns="t_gone").itertuples(index=False, name=None)) == sorted(sim.detections)
    reached = {e: {v for x, v, _t in sim.copies if x == e} for e in range(7)}
    below = _subtree(seq, 0, cut) - {cut}
    assert len(below & reached[2]) > len(below & reached[1]) and cut in reached[2]   # grafted back
    assert new_root != root1 and seq.children[(1, root1)] & reached[4]             # the new root's tree
    assert loop == 0 and low in reached[5]                                          # no loop, nothing lost
    assert not reached[6]                                                   # not a root before its delivery


def _route(ring, seq: SequentialScribe, topic: int, v: int, t: float, link, spans) -> list[tuple[int, float]]:
    """A SUBSCRIBE's hops from v at t along the start state's routes, ending at the live node closest to the
    topicId where the next hop would be down at its arrival."""
    hops = [(v, t)]
    while (nxt := seq.next_hop(v, topic)) is not None:
        arrive = t + link(v, nxt) + 1.0
        if any(u == nxt and down <= arrive < up for u, down, up in spans):
            alive = np.ones(ring.n, bool)
            alive[[u for u, down, up in spans if down <= arrive < up]] = False
            key = seq.topics.hi[topic:topic + 1], seq.topics.lo[topic:topic + 1]
            nxt = int(closest_live(ring, alive, *key)[0])
            if nxt != v:
                hops.append((nxt, t + link(v, nxt) + 1.0))
            break
        hops.append((nxt, arrive))
        v, t = nxt, arrive
    return hops


def _on(o, timed: scribe_timed.TimedTrees, at_root, hb: scribe_timed.Heartbeats, forward) -> tuple:
    """Copies (event, node, t), heartbeats per bin and timeouts on trees in time."""
    copies = scribe_timed.deliver(o, timed, at_root, 1.0, hb.until, forward).localCheckpoint()
    try:
        return (copies.drop("topic").toPandas(), scribe_timed.heartbeats(timed, copies, hb, forward),
                scribe_timed.timeouts(o, timed, copies, hb, forward))
    finally:
        copies.unpersist()


def _spark(o, trees, at_root, left, hb: scribe_timed.Heartbeats, forward) -> tuple:
    """The Spark run's copies (event, node, t), heartbeats per bin and timeouts, with the forward upcall."""
    timed = scribe_timed.at_start(trees, left)
    try:
        return _on(o, timed, at_root, hb, forward)
    finally:
        for frame in timed.frames():
            frame.unpersist()


def _subtree(seq: SequentialScribe, topic: int, node: int) -> set[int]:
    """`node` and every node below it in the topic's tree."""
    out, todo = set(), [node]
    while todo:
        v = todo.pop()
        out.add(v)
        todo.extend(seq.children.get((topic, v), ()))
    return out


def _size(seq: SequentialScribe, topic: int) -> int:
    """The nodes of the topic's tree."""
    return len(_subtree(seq, topic, seq.roots[topic]))
