"""Each protocol superstep on a tiny hand-built overlay, the expected frames written out by hand.

The route, subscribe and join tests share four nodes (b = 4, one hex digit per routing-table
column; low 64 bits 0): node 0 = 0x1..., node 1 = 0x2..., node 2 = 0x8..., node 3 = 0xC... (and
node 4 = 0xB..., the join's newcomer). Leaf sets of size 2 ([left, right] neighbour on the ring),
one routing-table row (each other node under its first digit), no neighbourhood set. Locations on
the plane make every distance a whole number. The repair tests build their own small rings.
"""
import numpy as np
import pytest
from pyspark.testing import assertDataFrameEqual

from scribe_spark import bsp, topology
from scribe_spark.pastry import failures, joins
from scribe_spark.pastry import overlay as ov
from scribe_spark.pastry.kernels import Ring
from scribe_spark.scribe import trees as tr
from scribe_spark.scribe.topics import Topics

FIRST_DIGIT = [0x1, 0x2, 0x8, 0xC, 0xB]
LEAF = [[3, 1], [0, 2], [1, 3], [2, 0]]
XY = [(0, 0), (3, 4), (6, 8), (0, 8), (6, 0)]   # d(0,1) = 5, d(0,2) = 10, d(0,3) = 8, d(1,3) = 5, d(1,4) = 5


def key(digits: int, low: int = 0) -> int:
    """A 64-bit high half from its leading hex digits (0x1F -> 0x1F00...00) plus `low`."""
    width = len(f"{digits:x}")
    return (digits << (64 - 4 * width)) + low


def overlay(spark, nodes: int) -> ov.Overlay:
    """The four-node overlay on a ring of `nodes` ids (5: node 4 is known to the ring, not yet joined)."""
    hi = np.array([key(d) for d in FIRST_DIGIT[:nodes]], dtype=np.uint64)
    ring = Ring(hi, np.zeros(nodes, dtype=np.uint64), 4, 2, 0,
                topology.Proximity("plane", coords=np.array(XY[:nodes], dtype=float)))
    state = spark.createDataFrame([(i, LEAF[i], table(i, range(4)), []) for i in range(4)], ov.STATE_SCHEMA)
    return ov.Overlay(ring, spark.sparkContext.broadcast(ring), state.persist(), "proximity")


def table(me: int, nodes) -> list[int]:
    """Node `me`'s routing table: one row, each other node under its first digit, -1 elsewhere."""
    rt = [-1] * 16
    for j in nodes:
        if j != me:
            rt[FIRST_DIGIT[j]] = j
    return rt


@pytest.fixture(scope="module")
def four(spark):
    o = overlay(spark, 4)
    yield o
    o.unpersist()


def test_route_step_applies_the_leaf_table_and_rare_rules_one_hop_per_superstep(spark, four, progress):
    starts = [  # (src, key high half)
        (0, key(0x9)),          # no leaf range, no entry under digit 9: rare case to node 2 (closest)
        (1, key(0x1, 1)),       # within node 1's leaf range: leaf rule to node 0
        (3, key(0x2, 5)),       # outside node 3's leaf range: table entry under digit 2, node 1
        (2, key(0x8)),          # node 2's own id: delivered where it starts
        (3, key(0x1F)),         # table entry under digit 1 (node 0), whose leaf set knows node 1 is closer
    ]
    src = np.array([s for s, _ in starts])
    hi = np.array([k for _, k in starts], dtype=np.uint64)
    msgs = ov.messages_frame(spark, src, hi, np.zeros(len(starts), dtype=np.uint64))
    got = ov.route(four, msgs).select("mid", "dest", "hops", "rare", "distance", "direct")
    want = spark.createDataFrame(
        [(0, 2, 1, 1, 10.0, 10.0), (1, 0, 1, 0, 5.0, 5.0), (2, 1, 1, 0, 5.0, 5.0), (3, 2, 0, 0, 0.0, 0.0),
         (4, 1, 2, 0, 13.0, 5.0)],
        "mid long, dest long, hops int, rare int, distance double, direct double")
    assertDataFrameEqual(got, want)
    assert [line.split(" (")[0] for line in progress] == [
        "route superstep 1: 4 messages in flight", "route superstep 2: 1 messages in flight",
        "route superstep 3: 0 messages in flight"]


def test_subscribe_steps_build_each_tree_hop_by_hop_with_forwarders_joining(spark, four, progress):
    # topic 0 (key 0x9...) has root node 2; topic 1 (key 0x1F...) root node 1, reached through node 0
    topics = Topics(["t0", "t1"], ["c", "c"], np.array([key(0x9), key(0x1F)], dtype=np.uint64),
                    np.zeros(2, dtype=np.uint64), ["0" * 16, "0" * 16])
    subs = tr.subscriptions_frame(spark, np.array([0, 0, 0, 1, 1]), np.array([0, 1, 3, 3, 2]))
    trees = tr.subscribe(four, topics, subs)
    assertDataFrameEqual(trees.edges, spark.createDataFrame(
        [(0, 0, 2), (0, 1, 2), (0, 3, 2), (1, 3, 0), (1, 2, 0), (1, 0, 1)], "topic long, src long, dst long"))
    assertDataFrameEqual(trees.members, spark.createDataFrame(
        [(0, n) for n in (0, 1, 2, 3)] + [(1, n) for n in (0, 1, 2, 3)], "topic long, node long"))
    assertDataFrameEqual(trees.roots, spark.createDataFrame([(0, 2), (1, 1)], "topic long, node long"))
    assert trees.supersteps == 3
    assert [line.split(" (")[0] for line in progress] == [
        "subscribe superstep 1: 5 SUBSCRIBE messages in flight",
        "subscribe superstep 2: 1 SUBSCRIBE messages in flight",
        "subscribe superstep 3: 0 SUBSCRIBE messages in flight"]


def test_join_routes_to_the_closest_node_builds_the_newcomer_and_updates_the_nodes_it_names(spark, progress):
    o = overlay(spark, 5)
    # node 4 (0xB..., at (6, 0)) contacts node 1, its nearest on the plane; the JOIN goes by the rare case
    # to node 3, the closest to 0xB...; node 4 takes node 1's row 0 (and node 1), node 3's leaf set
    grown, counts = joins.join_batch(o, np.arange(4), np.array([4]))
    want = [(0, [3, 1]), (1, [0, 2]), (2, [1, 4]), (3, [4, 0]), (4, [2, 3])]
    assertDataFrameEqual(grown.state, spark.createDataFrame(
        [(i, leaf, table(i, range(5)), []) for i, leaf in want], ov.STATE_SCHEMA))
    # one hop; node 4 gets node 1's row and node 3's leaf set (+1) and tells the four nodes it names;
    # one exchange superstep of the 5 x 2 leaf-set entries changes nothing
    assert counts == {"route": 1, "transfer": 3, "notify": 4, "leaf_exchange": 10}
    assert [line.split(" (")[0] for line in progress] == [
        "JOIN superstep 1: 1 messages in flight", "JOIN superstep 2: 0 messages in flight",
        "leaf-set exchange superstep 1: 0 leaf-set messages in flight"]
    grown.unpersist()


def test_leaf_set_repair_step_asks_the_farthest_live_node_on_the_side_that_lost_one(spark, progress):
    # eight nodes 0x1... .. 0x8... in ring order, leaf sets of 4 ([two smaller, two larger], nearest
    # first); node 3 fails. Its four neighbours each ask the farthest live node on that side (nodes
    # 1 and 5 ask 2 and 4, nodes 2 and 4 ask 4 and 2) and merge its reply: one superstep repairs all.
    ring = Ring(np.array([key(d) for d in range(1, 9)], dtype=np.uint64), np.zeros(8, dtype=np.uint64), 4, 4,
                0, topology.Proximity("plane", coords=np.arange(16, dtype=float).reshape(8, 2)))

    def leaf(i: int) -> list[int]:
        return [(i - 1) % 8, (i - 2) % 8, (i + 1) % 8, (i + 2) % 8]

    state = spark.createDataFrame([(i, leaf(i), [], []) for i in range(8)], ov.STATE_SCHEMA).persist()
    o = ov.Overlay(ring, spark.sparkContext.broadcast(ring), state, "proximity")
    dead = np.zeros(8, dtype=bool)
    dead[3] = True
    repaired, messages = failures.repair_leaf_sets(o, dead)
    want = {0: [7, 6, 1, 2], 1: [0, 7, 2, 4], 2: [1, 0, 4, 5], 4: [2, 1, 5, 6], 5: [4, 2, 6, 7],
            6: [5, 4, 7, 0], 7: [6, 5, 0, 1]}
    assertDataFrameEqual(repaired, spark.createDataFrame([(i, v, [], []) for i, v in want.items()],
                                                         ov.STATE_SCHEMA))
    assert messages == 4 * failures.MESSAGES_PER_RPC
    assert [line.split(" (")[0] for line in progress] == ["leaf-set repair superstep 1: 0 requests in flight"]
    bsp.release(repaired)
    state.unpersist()


def test_routing_table_repair_steps_ask_row_r_then_row_r_plus_1_nearest_contact_first(spark, progress):
    # nodes 0x10, 0x20, 0x81, 0x82, 0xC0...; node 2 (0x81) fails. Nodes 0 and 4 held it at row 0,
    # column 8: each asks its nearest live row-0 entry, node 1 (5 away), whose column 8 is node 3.
    # Node 3 held it at row 1, column 1, and has no other entry in rows 1 or 2 to ask: it stays empty.
    firsts = [0x10, 0x20, 0x81, 0x82, 0xC0]
    ring = Ring(np.array([key(d) for d in firsts], dtype=np.uint64), np.zeros(5, dtype=np.uint64), 4, 2, 0,
                topology.Proximity("plane", coords=np.array([(0, 0), (3, 4), (6, 8), (0, 8), (6, 0)], float)))

    def rt(entries: dict[int, int], width: int = 16) -> list[int]:
        out = [-1] * width
        for pos, node in entries.items():
            out[pos] = node
        return out

    tables = {0: rt({2: 1, 8: 2, 12: 4}), 1: rt({1: 0, 8: 3, 12: 4}),
              3: rt({1: 0, 2: 1, 12: 4, 16 + 1: 2}, 32), 4: rt({1: 0, 2: 1, 8: 2})}
    state = spark.createDataFrame([(i, [], t, []) for i, t in tables.items()], ov.STATE_SCHEMA)
    o = ov.Overlay(ring, spark.sparkContext.broadcast(ring), state, "proximity")
    dead = np.array([False, False, True, False, False])
    fixed, counts = failures.repair_routing_tables(o, state, dead)
    tables[0][8] = tables[4][8] = 3
    tables[3][16 + 1] = -1
    assertDataFrameEqual(fixed, spark.createDataFrame([(i, [], t, []) for i, t in tables.items()],
                                                      ov.STATE_SCHEMA))
    # nodes 0 and 4 each asked one contact (node 1, the nearest, had the answer)
    assert counts == {"holes": 3, "repaired": 2, "messages": 2 * failures.MESSAGES_PER_RPC}
    assert [line.split(" (")[0] for line in progress] == [
        "routing-table repair superstep 1: 1 holes in flight",
        "routing-table repair superstep 2: 1 holes in flight"]
