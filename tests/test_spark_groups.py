"""Scribe subscriptions drawn in Spark (S1, S2): sizes, distinctness, uniformity, and the same workload
whatever the partitioning."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from scribe_spark.streams import Purpose, stream
from scribe_spark.workloads import spark_groups as sg


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 64 node numbers, so that a few hundred nodes span several chunks."""
    monkeypatch.setattr(sg, "CHUNK", 64)
    monkeypatch.setattr(sg, "ROWS_PER_TASK", 50)


def _pairs(frame) -> pd.DataFrame:
    return _pairs_of(frame.toPandas())


def _pairs_of(table: pd.DataFrame) -> pd.DataFrame:
    return table.astype("int64").sort_values(["topic", "node"]).reset_index(drop=True)


def test_each_topic_gets_its_size_in_distinct_nodes_across_chunks(spark, small_chunks):
    sizes = np.array([300, 1, 64, 65, 200, 17])
    counts = sg.chunk_counts(sizes, 300, seed=4)
    assert counts.groupby("topic").k.sum().tolist() == sizes.tolist()
    assert (counts.k <= sg.chunk_widths(300, 64)[counts.chunk]).all() and len(sg.chunk_widths(300, 64)) == 5
    subs = _pairs(sg.members(spark, counts, 300, seed=4))
    assert subs.groupby("topic").node.nunique().tolist() == sizes.tolist()
    assert subs.groupby("topic").size().tolist() == sizes.tolist()
    assert subs.node.between(0, 299).all()
    assert set(subs[subs.topic == 0].node) == set(range(300))     # a topic of every node has them all


def test_the_same_seed_gives_the_same_workload_whatever_the_partitions(spark, small_chunks, monkeypatch):
    sizes = np.array([150, 40, 7, 99])
    counts = sg.chunk_counts(sizes, 250, seed=9)
    one = _pairs(sg.members(spark, counts, 250, seed=9))
    monkeypatch.setattr(sg, "ROWS_PER_TASK", 1)                   # a task per (topic, chunk)
    many = _pairs(sg.members(spark, counts, 250, seed=9))
    assert one.equals(many)
    assert not one.equals(_pairs(sg.members(spark, sg.chunk_counts(sizes, 250, seed=10), 250, seed=10)))
    forged = _pairs(sg.forged_requests(spark, 150, 4, 250, seed=9))    # blocks of 64: 64, 64, 22
    want = []
    for block, n in enumerate((64, 64, 22)):   # each block's draws from its own stream, in any task
        rng = stream(9, Purpose.FORGED, block)
        want.append(pd.DataFrame({"topic": rng.integers(0, 4, n), "node": rng.integers(0, 250, n)}))
    assert forged.equals(_pairs_of(pd.concat(want)))
    assert forged.topic.between(0, 3).all() and forged.node.between(0, 249).all()


def test_members_are_uniform_over_the_nodes(small_chunks):
    """Chunk counts and in-chunk draws together pick every node equally often (chi-square, 1,000 topics)."""
    nodes, size, topics = 200, 30, 1000
    counts = sg.chunk_counts(np.full(topics, size), nodes, seed=2)
    hits = np.zeros(nodes)
    for t, c, k in counts.itertuples(index=False):
        hits[sg.chunk_members(2, nodes, t, c, k, 64)] += 1
    assert hits.sum() == size * topics
    assert stats.chisquare(hits).pvalue > 1e-3


def test_a_picked_member_is_the_drawn_index_of_its_topic_in_draw_order(spark, small_chunks):
    """Each topic's creator: the member at the CREATORS stream's index among its members, chunk by chunk
    in the order they were drawn (computed here from the chunks' own draws)."""
    sizes = np.array([120, 3, 66, 1, 200, 130])
    counts = sg.chunk_counts(sizes, 200, seed=5)
    picked = sg.picked_members(spark, counts, 200, seed=5)
    index = stream(5, Purpose.CREATORS, 200).integers(0, sizes)
    for t, size in enumerate(sizes):
        mine = counts[counts.topic == t].sort_values("chunk")
        drawn = np.concatenate([sg.chunk_members(5, 200, t, c, k, 64)
                                for _, c, k in mine.itertuples(index=False)])
        assert len(drawn) == size and picked[t] == drawn[index[t]], t
