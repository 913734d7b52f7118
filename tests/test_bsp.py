"""The superstep engine: termination, bounds, progress lines, emissions and released frames."""
from functools import reduce

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from scribe_spark import bsp
from scribe_spark.scribe import trees as tr


def countdown(inflight, k, n):
    """Each message carries a counter; it is emitted and, while positive, sent on decremented."""
    return bsp.Superstep(inflight.where(F.col("c") > 0).select((F.col("c") - 1).alias("c")),
                         {"seen": inflight.select("c", F.lit(k).alias("k"))})


def test_runs_until_nothing_is_in_flight_and_unions_what_each_step_emits(spark, progress):
    out = bsp.run("countdown", spark.createDataFrame([(0,), (2,), (4,)], "c int"), countdown, 10)
    assert out.supersteps == 5 and out.left_count == 0
    # message 4 is seen at steps 1..5 with 4..0, message 2 at steps 1..3, message 0 at step 1
    seen = [(4 - i, i + 1) for i in range(5)] + [(2 - i, i + 1) for i in range(3)] + [(0, 1)]
    assertDataFrameEqual(out.emitted["seen"], spark.createDataFrame(seen, "c int, k int"))
    assert [line.split(" (")[0] for line in progress] == [
        "countdown superstep 1: 2 messages in flight", "countdown superstep 2: 2 messages in flight",
        "countdown superstep 3: 1 messages in flight", "countdown superstep 4: 1 messages in flight",
        "countdown superstep 5: 0 messages in flight"]


def test_exceeding_the_bound_raises_naming_the_loop_and_the_messages_left(spark):
    frame = spark.createDataFrame([(9,), (7,)], "c int")
    with pytest.raises(bsp.SuperstepBoundExceeded,
                       match=r"countdown: 2 messages still in flight after 3 supersteps"):
        bsp.run("countdown", frame, countdown, 3)


def test_a_loop_that_stops_by_design_returns_what_is_left(spark):
    out = bsp.run("countdown", spark.createDataFrame([(1,), (5,)], "c int"), countdown, 2, rounds=2)
    assert out.supersteps == 2 and out.left_count == 1
    assertDataFrameEqual(out.left, spark.createDataFrame([(3,)], "c int"))


def test_nothing_in_flight_runs_no_superstep(spark):
    out = bsp.run("countdown", spark.createDataFrame([], "c int"), countdown, 3)
    assert out.supersteps == 0 and out.emitted == {}


def test_in_flight_frames_are_released_once_emissions_are_materialized(spark):
    sc = spark.sparkContext

    def cached() -> int:
        return len(sc._jsc.sc().getRDDStorageInfo())

    before = cached()
    out = bsp.run("countdown", spark.createDataFrame([(6,)], "c int"), countdown, 10)
    # left: the last (empty) in-flight frame and the materialized emissions, not one frame per superstep
    assert out.supersteps == 7 and cached() - before <= 2
    assert out.emitted["seen"].count() == 7


def test_a_carried_frame_is_cut_each_superstep_and_only_the_last_one_stays(spark):
    sc = spark.sparkContext

    def cached() -> int:
        return len(sc._jsc.sc().getRDDStorageInfo())

    given = spark.createDataFrame([(0,)], "c int")
    carry = bsp.Carry(total=given)

    def add(inflight, k, n):
        """The carried frame gathers every counter seen; each step reads it more than once."""
        seen = carry.cut(carry["total"].unionByName(inflight))
        carry.keep("total", seen.distinct())
        return bsp.Superstep(inflight.where(F.col("c") > 0).select((F.col("c") - 1).alias("c")),
                             {"size": seen.select(F.count("*").alias("n"), F.lit(k).alias("k"))})

    before = cached()
    out = bsp.run("gather", spark.createDataFrame([(3,)], "c int"), add, 10, carry=carry)
    assert out.supersteps == 4
    assertDataFrameEqual(carry["total"], spark.createDataFrame([(0,), (1,), (2,), (3,)], "c int"))
    assertDataFrameEqual(out.emitted["size"], spark.createDataFrame([(2, 1), (3, 2), (4, 3), (5, 4)],
                                                                    "n long, k int"))
    # left: the last in-flight frame, the emission and the last carried frame; never the one given
    assert cached() - before <= 3
    assert given.count() == 1


def test_a_loop_on_disk_cuts_its_messages_and_carry_to_disk_with_the_same_results(spark):
    sc = spark.sparkContext

    def levels() -> dict[int, tuple[bool, bool]]:
        """(uses memory, uses disk) of every cached RDD, by id."""
        return {r.id(): (r.storageLevel().useMemory(), r.storageLevel().useDisk())
                for r in sc._jsc.sc().getRDDStorageInfo()}

    def run(on_disk: bool):
        carry = bsp.Carry()
        seen = []

        def add(inflight, k, n):
            """Counters count down; each superstep keeps and cuts a frame and notes what is cached."""
            carry.keep("last", inflight)
            carry.cut(inflight.select((F.col("c") * 2).alias("d"))).count()
            seen.append(levels())
            return countdown(inflight, k, n)

        out = bsp.run("countdown", spark.createDataFrame([(2,), (1,)], "c int"), add, 10, carry=carry,
                      on_disk=on_disk)
        return out, seen

    before = set(levels())
    out, seen = run(on_disk=True)
    made = {i: lv for step in seen for i, lv in step.items() if i not in before}
    assert len(made) >= 3 * 2 and set(made.values()) == {(False, True)}   # per superstep: message, kept, cut
    before = set(levels())   # the first loop's last messages and kept frame stay cached
    plain, seen = run(on_disk=False)
    assert {lv for step in seen for i, lv in step.items() if i not in before} == {(True, True)}
    assertDataFrameEqual(out.emitted["seen"], plain.emitted["seen"])
    assert out.supersteps == plain.supersteps == 3


def estimate(frame: DataFrame) -> int:
    """The size Spark's planner assumes for `frame`, in bytes."""
    return int(frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())


def test_an_unsized_loop_cuts_its_messages_without_the_estimate_of_their_plan(spark):
    seen = []

    def shrink(inflight: DataFrame, k: int, n: int) -> bsp.Superstep:
        """Each superstep's messages come from a join of the messages with themselves."""
        seen.append(estimate(inflight))
        pairs = inflight.join(inflight.select("c", F.col("c").alias("d")), "c")
        return bsp.Superstep(pairs.where(F.col("c") > 0).select((F.col("c") - 1).alias("c")))

    frame = spark.range(4).select(F.col("id").alias("c"))   # c = 0..3: each join is one to one
    out = bsp.run("self-join", frame, shrink, 10, unsized=True)
    default = int(spark.conf.get("spark.sql.defaultSizeInBytes").rstrip("b"))
    assert out.supersteps == 4 and seen[0] < default and seen[1:] == [default] * 3
    seen.clear()
    bsp.run("self-join", frame, shrink, 10)
    assert seen[0] < seen[1] < seen[2] < seen[3]   # without: the estimate multiplies each superstep


def test_an_unsized_cut_keeps_its_rows_and_blocks_and_forgets_the_estimate_that_squares(spark):
    sc = spark.sparkContext

    def grow(carry: bsp.Carry, unsized: bool) -> list[int]:
        """Five supersteps' worth of a state joined with a frame computed from itself; the cuts' RDDs."""
        made = []
        for _ in range(5):
            state = carry["state"]
            merged = state.select("id", (F.col("v") + 1).alias("w"))
            updated = state.join(merged, "id", "left").select("id", F.coalesce("w", "v").alias("v"))
            cut = carry.keep("state", updated, unsized=unsized)
            made.append(cut._jdf.queryExecution().analyzed().rdd().id())
        return made

    def stored(rdds: list[int]) -> list[int]:
        held = {info.id() for info in sc._jsc.sc().getRDDStorageInfo()}
        return [r for r in rdds if r in held]

    start = spark.range(1000).select("id", F.lit(0).alias("v"))
    squared = bsp.Carry(state=start)
    grow(squared, False)
    assert estimate(squared["state"]) > 2 ** 200
    unsized = bsp.Carry(state=start)
    made = grow(unsized, True)
    kept = unsized["state"]
    assert estimate(kept) == int(spark.conf.get("spark.sql.defaultSizeInBytes").rstrip("b"))
    assertDataFrameEqual(kept, spark.range(1000).select("id", F.lit(5).alias("v")))
    assert stored(made) == made
    unsized.release()   # the four replaced cuts are freed through the unsized frames; the last stays
    assert stored(made) == made[-1:]
    bsp.release(kept)
    squared.release()
    bsp.release(squared["state"])


def test_gathered_chunks_are_joined_where_they_sit_and_released_with_the_loop(spark):
    sc = spark.sparkContext

    def cached() -> int:
        return len(sc._jsc.sc().getRDDStorageInfo())

    carry = bsp.Carry()
    chunks = [carry.gather("seen", spark.createDataFrame([(5,)], "c int"), ("c",), 2)]

    def visit(inflight, k, n):
        """Each counter not seen before is gathered and emitted; counters go down to 0."""
        fresh = inflight.join(reduce(DataFrame.unionByName, carry.gathered("seen")), "c", "left_anti")
        chunk = carry.gather("seen", fresh, ("c",), 2)
        chunks.append(chunk)
        assert bsp.hashed_by(chunk, "c")
        return bsp.Superstep(inflight.where(F.col("c") > 0).select((F.col("c") - 1).alias("c")),
                             {"fresh": chunk})

    before = cached()
    out = bsp.run("visit", spark.createDataFrame([(7,), (3,)], "c int"), visit, 10, carry=carry)
    assert out.supersteps == 8 and carry.gathered("seen") == []
    # 5 was given, so it is never fresh; 3, 2, 1 and 0 come twice (from 7 and from 3) and are fresh once
    assertDataFrameEqual(out.emitted["fresh"], spark.createDataFrame([(c,) for c in (7, 6, 4, 3, 2, 1, 0)],
                                                                     "c int"))
    # the nine chunks, the given one included, are no longer cached; left: the last in-flight frame and
    # the emission
    assert len(chunks) == 9 and not any(c.storageLevel.useMemory or c.storageLevel.useDisk for c in chunks)
    assert cached() - before <= 1
    carry.release()   # a second release (as after a loop that raised) is harmless


def test_quiet_holds_the_progress_lines_back(spark, progress):
    with bsp.quiet():
        bsp.run("countdown", spark.createDataFrame([(1,)], "c int"), countdown, 3)
    assert progress == []
    bsp.run("countdown", spark.createDataFrame([(1,)], "c int"), countdown, 3)
    assert len(progress) == 2


def test_unsubscribe_step_prunes_a_hand_built_tree_one_level_per_superstep(spark, progress):
    """Root 1; 2 forwards for subscribers 3 and 4; 5 subscribes directly. 3 and 4 leave."""
    edges = spark.createDataFrame([(0, 2, 1), (0, 3, 2), (0, 4, 2), (0, 5, 1)],
                                  "topic long, src long, dst long")
    subs = spark.createDataFrame([(0, 3), (0, 4), (0, 5)], "topic long, node long")
    roots = spark.createDataFrame([(0, 1)], "topic long, node long")
    trees = tr.Trees(edges, spark.createDataFrame([(0, n) for n in range(1, 6)], "topic long, node long"),
                     roots, 2)
    after = tr.unsubscribe(trees, subs, spark.createDataFrame([(0, 3), (0, 4)], "topic long, node long"))
    # superstep 1: 3 and 4 unsubscribe from 2; superstep 2: 2, childless and no subscriber, leaves 1
    assert after.supersteps == 2
    assert [line.split(" (")[0] for line in progress] == [
        "unsubscribe superstep 1: 1 UNSUBSCRIBE messages in flight",
        "unsubscribe superstep 2: 0 UNSUBSCRIBE messages in flight"]
    assertDataFrameEqual(after.edges, spark.createDataFrame([(0, 5, 1)], "topic long, src long, dst long"))
    assertDataFrameEqual(after.members, spark.createDataFrame([(0, 1), (0, 5)], "topic long, node long"))


def test_multicast_step_sends_a_copy_to_each_child_one_tree_level_per_superstep(spark, progress):
    """Root 1 with children 2 and 5; 2 with children 3 and 4. A copy counts the hops it took."""
    edges = spark.createDataFrame([(0, 2, 1), (0, 3, 2), (0, 4, 2), (0, 5, 1)],
                                  "topic long, src long, dst long")
    starts = spark.createDataFrame([(0, 1, 0)], "topic long, node long, hops int")

    def forward(at_parent):
        return at_parent.select("topic", F.col("src").alias("node"), (F.col("hops") + 1).alias("hops"))

    reached = tr.multicast("publish", starts, edges, 2, forward)
    want = [(0, 1, 0), (0, 2, 1), (0, 5, 1), (0, 3, 2), (0, 4, 2)]
    assertDataFrameEqual(reached, spark.createDataFrame(want, "topic long, node long, hops int"))
    assert [line.split(" (")[0] for line in progress] == [
        "publish superstep 1: 2 event copies in flight", "publish superstep 2: 2 event copies in flight",
        "publish superstep 3: 0 event copies in flight"]
    # no message: no superstep, and an empty frame of the messages' columns
    none = tr.multicast("publish", starts.limit(0), edges, 2, forward)
    assert none.columns == starts.columns and none.count() == 0


def countdown_split(inflight, k, n):
    """`countdown` as a Split: one frame per superstep, read for the next messages and for what is seen."""
    stepped = inflight.select("c", F.lit(k).alias("k"))
    return bsp.Split(stepped, lambda s: s.where(F.col("c") > 0).select((F.col("c") - 1).alias("c")),
                     {"seen": lambda s: s, "steps": stepped.select("k").limit(1)})


def test_a_split_step_emits_what_the_plain_step_does_from_one_cut_per_superstep(spark):
    sc = spark.sparkContext
    frame = spark.createDataFrame([(0,), (2,), (4,)], "c int")
    plain = bsp.run("countdown", frame, countdown, 10)
    before = len(sc._jsc.sc().getRDDStorageInfo())
    split = bsp.run("countdown", frame, countdown_split, 10)
    assert split.supersteps == plain.supersteps == 5
    assertDataFrameEqual(split.emitted["seen"], plain.emitted["seen"])
    assertDataFrameEqual(split.emitted["steps"], spark.createDataFrame([(k,) for k in range(1, 6)], "k int"))
    # kept: the last cut (it holds what is left) and the two materialized emissions
    assert len(sc._jsc.sc().getRDDStorageInfo()) - before <= 3


def test_a_superstep_runs_one_spark_job_its_count_fills_the_cut(spark):
    sc = spark.sparkContext
    sc.setJobGroup("one-job-per-superstep", "bsp test")
    try:
        out = bsp.run("countdown", spark.createDataFrame([(3,)], "c int"), countdown, 10)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    jobs = sc.statusTracker().getJobIdsForGroup("one-job-per-superstep")
    # the start's count (it fills the start's cut), one per superstep, the emission's one cut
    assert out.supersteps == 4 and len(jobs) == 1 + out.supersteps + 1


@pytest.mark.parametrize("count", [2, 50])   # fewer messages than frame rows, then more
def test_a_join_with_a_frame_cached_by_its_key_moves_the_messages_only(spark, count):
    static = spark.range(40).selectExpr("id", "id * 10 as v").repartition(3, "id").persist()
    bsp.rows(static)   # a cached plan's partitioning is known once it is materialized
    messages = spark.createDataFrame([(i, i % 40) for i in range(count)], "mid int, at long")
    assert bsp.hashed_by(static, "id") and not bsp.hashed_by(static.localCheckpoint(), "id")
    joined = bsp.join_static(messages, count, static, 40, "at", "id")
    plan = joined._jdf.queryExecution().executedPlan().toString()
    plan = plan.split("InMemoryRelation")[0]   # the join's plan, not how the cache was made
    # one exchange, the messages'; the static frame is read in place (hashed per task or streamed),
    # never shuffled or sorted
    assert "ShuffledHashJoin" in plan and plan.count("Exchange") == 1 and "Sort [" not in plan
    assertDataFrameEqual(joined.select("mid", "v"), messages.join(static, messages["at"] == static["id"])
                         .select("mid", "v"))
    static.unpersist()
