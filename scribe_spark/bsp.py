"""The bulk-synchronous superstep loop that every protocol runs on.

A protocol supplies a step: given the messages in flight (a DataFrame) it returns the
messages for the next superstep and, by name, what this superstep emits (delivered
messages, tree edges, roots, ...) — either as frames (`Superstep`) or as readers of one
frame that holds them all (`Split`). `run` owns everything around it:

- termination: the loop ends when no message is in flight; a loop still busy after `bound`
  supersteps raises SuperstepBoundExceeded naming the loop and the messages left (never a
  silent drop). A loop that ends by design after a fixed number of rounds passes `rounds`
  and gets the messages left over back;
- progress: one line per superstep, `<loop> superstep k: M <unit> in flight (t s)`, k from 1,
  logged at INFO on this module's logger (`quiet()` holds the library's lines back in a block);
- lineage: the next in-flight frame, or a `Split`'s frame, is locally checkpointed (one cut per
  superstep), lazily: the count of the messages left is the Spark job that fills the cut, so a
  superstep's cut and count are one job, not two (a step that shuffles or broadcasts adds its
  own jobs for those, as adaptive execution runs each exchange as a job);
- emissions: each name's frames are unioned over all supersteps and materialized once;
- static frames a loop joins with each superstep can be made `resident` (cached, partitioned and
  sorted by the join keys) so that only the messages move;
- loop state: frames a loop carries from superstep to superstep (a node state, the members so
  far) and frames a step reads more than once live in a `Carry`, which cuts each one;
- memory: once the emissions are materialized the loop's in-flight frames, and every frame its
  `Carry` replaced, cut or gathered on the way, are released.
"""
from __future__ import annotations

import logging
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

_log = logging.getLogger(__name__)


class SuperstepBoundExceeded(RuntimeError):
    """A superstep loop still had messages in flight after its bound."""


@dataclass
class Superstep:
    """What one superstep hands back: the next in-flight messages and what it emits, by name."""

    inflight: DataFrame
    emitted: dict[str, DataFrame] = field(default_factory=dict)


@dataclass
class Split:
    """A superstep whose outputs are all read from one frame: the engine cuts that frame once.

    `inflight` and the emissions given as functions read the cut frame (usually a filter and a
    select), so one local checkpoint serves the next superstep and those emissions; an
    emission given as a frame is taken as it is.
    """

    frame: DataFrame
    inflight: Callable[[DataFrame], DataFrame]
    emitted: dict[str, Callable[[DataFrame], DataFrame] | DataFrame] = field(default_factory=dict)


@dataclass
class Outcome:
    """What a whole loop produced."""

    emitted: dict[str, DataFrame]   # per name: the union over supersteps (names never emitted are absent)
    supersteps: int                 # supersteps run
    left: DataFrame                 # messages still in flight at the end (empty unless `rounds` stopped it)
    left_count: int


class Carry:
    """The frames a loop carries across supersteps, by name, and the cuts its steps make.

    `keep(name, frame)` carries a locally checkpointed copy of `frame` from now on (frames given
    to the constructor are the caller's and are never released); `cut(frame)` checkpoints a
    frame a step reads more than once; `gather(name, frame, keys, partitions)` adds a resident
    chunk to a set that grows each superstep (the members so far) and that later supersteps join
    with where its chunks already are. Given to `run`, the frames replaced or cut on the way and
    the gathered chunks are released with the loop's in-flight frames (emit the chunks to get
    their union); the last kept frames stay.
    """

    def __init__(self, **frames: DataFrame) -> None:
        self._frames = dict(frames)
        self.level: StorageLevel | None = None   # where keep() and cut() write; `run` sets it
        self._made: list[DataFrame] = []   # the frames keep() cut (those given at the start are not ours)
        self._spent: list[DataFrame] = []
        self._gathered: dict[str, list[DataFrame]] = {}

    def __getitem__(self, name: str) -> DataFrame:
        return self._frames[name]

    def keep(self, name: str, frame: DataFrame, unsized: bool = False) -> DataFrame:
        """Carry `frame`, cut, as `name` from now on; the frame it replaces is spent.

        With `unsized` the cut forgets the size Spark estimated from its plan (see `_unsized`): for
        a frame joined each superstep with one computed from itself, such as a node state updated
        from its own leaf sets, whose estimate would otherwise grow by a power each superstep.
        """
        old = self._frames.get(name)
        new = frame.localCheckpoint(storageLevel=self.level)
        if unsized:
            new = _unsized(new)
        self._frames[name] = new
        self._made.append(new)
        if old is not None and any(old is f for f in self._made):
            self._spent.append(old)
        return new

    def cut(self, frame: DataFrame) -> DataFrame:
        """Return `frame` cut, for a step that reads it more than once (spent with the loop)."""
        cut = frame.localCheckpoint(storageLevel=self.level)
        self._spent.append(cut)
        return cut

    def gather(self, name: str, frame: DataFrame, keys: tuple[str, ...], partitions: int) -> DataFrame:
        """Add `frame` to the chunks gathered as `name`, made `resident` by `keys`; return the chunk."""
        chunk = resident(frame, keys, partitions)
        self._gathered.setdefault(name, []).append(chunk)
        return chunk

    def gathered(self, name: str) -> list[DataFrame]:
        """The chunks gathered as `name` so far, oldest first (none before the first `gather`)."""
        return list(self._gathered.get(name, []))

    def release(self) -> None:
        """Free what the loop spent and gathered; the frames carried now stay (twice is harmless)."""
        for chunks in self._gathered.values():
            for chunk in chunks:
                chunk.unpersist()
        self._gathered = {}
        for frame in self._spent:
            release(frame)
        self._spent = []


Step = Callable[[DataFrame, int, int], "Superstep | Split"]


def run(loop: str, inflight: DataFrame, step: Step, bound: int,
        unit: str = "messages", rounds: int | None = None, carry: Carry | None = None,
        unsized: bool = False, on_disk: bool = False) -> Outcome:
    """Run supersteps of `step(inflight, k, n)` (k from 1, n = messages in flight) until none is left.

    `bound` is the most supersteps the protocol can need; more raises SuperstepBoundExceeded.
    With `rounds`, the loop stops after that many supersteps by design and returns what is left.
    With `carry`, the frames it spent (replaced, cut or gathered) are released with the in-flight
    frames, after the emissions are materialized. With `unsized`, the in-flight cuts after the
    first forget the size Spark estimated from their plans, as `Carry.keep(unsized=True)` does:
    for a loop whose messages are computed by joining the messages before with frames computed
    from them. With `on_disk`, the loop's cuts (and its `carry`'s) are written to local disk, not
    memory: for a loop whose messages outnumber the nodes, so that its cuts do not push the frames
    it joins with (a cached node state) out of memory; emissions are materialized as usual.
    """
    level = StorageLevel.DISK_ONLY if on_disk else None
    if carry is not None:
        carry.level = level

    def cut(frame: DataFrame) -> DataFrame:
        frame = frame.localCheckpoint(eager=False, storageLevel=level)
        return _unsized(frame) if unsized else frame

    inflight = inflight.localCheckpoint(eager=False, storageLevel=level)
    n = rows(inflight)          # fills the cut
    held = [inflight]
    emitted: dict[str, list[DataFrame]] = {}
    k = 0
    while n > 0 and (rounds is None or k < rounds):
        k += 1
        if k > bound:
            raise SuperstepBoundExceeded(
                f"{loop}: {n} {unit} still in flight after {bound} supersteps (the protocol's bound)")
        t0 = time.time()
        out = step(inflight, k, n)
        if isinstance(out, Split):
            whole = cut(out.frame)
            held.append(whole)
            inflight = out.inflight(whole)
            for name, read in out.emitted.items():
                emitted.setdefault(name, []).append(read if isinstance(read, DataFrame) else read(whole))
        else:
            for name, frame in out.emitted.items():
                emitted.setdefault(name, []).append(frame)
            inflight = cut(out.inflight)
            held.append(inflight)
        n = rows(inflight)          # one job fills the cut as it counts
        _log.info(f"{loop} superstep {k}: {n} {unit} in flight ({time.time() - t0:.1f}s)")
    done = {}
    for name, frames in emitted.items():
        union = frames[0]
        for f in frames[1:]:
            union = union.unionByName(f)
        done[name] = union.localCheckpoint()
    for frame in held[:-1]:
        release(frame)
    if carry is not None:
        carry.release()
    return Outcome(done, k, inflight, n)


@dataclass
class Pass:
    """One pass of a fixed-point loop: the events it derived, and what else it computed on the way."""

    events: DataFrame
    frames: dict[str, DataFrame] = field(default_factory=dict)


def fixed_point(loop: str, events: DataFrame, derive: Callable[[DataFrame, int, DataFrame | None], Pass],
                bound: int, unit: str = "events", changed: DataFrame | None = None) -> tuple[Pass, int]:
    """Run passes `derive(events, p, changed)` (p from 1) until a pass derives exactly the events it was
    given.

    The loop of a simulation in time over node state versioned by its events (a column `t`): a pass
    reads the state each event set implies and derives the events anew; when an event at time t
    depends only on events before t, each pass fixes at least the earliest event the last one got
    wrong, so the loop ends, with the events a sequential simulation would have. `changed` holds the
    rows by which a pass's events differ from those the pass before it was given (None when not
    known: on the first pass, unless the caller passes them), for a pass that derives anew only what
    they touch. Returns the last pass and the passes run; a loop still changing after `bound` passes
    raises SuperstepBoundExceeded. Progress: one line per pass, `<loop> pass p: M <unit>, C changed
    from t = T (s s)`, T the earliest time at which the pass's events differ from those it was given
    (-inf only if no other: events at -inf are what a node holds before time starts, read by all after).
    """
    events = _unsized(events.localCheckpoint())
    for p in range(1, bound + 1):
        t0 = time.time()
        out = derive(events, p, changed)
        new = _unsized(merged(out.events).localCheckpoint())
        diff = _unsized(merged(new.exceptAll(events).unionByName(events.exceptAll(new))).localCheckpoint())
        count, since = diff.agg(F.count("*"), F.min(F.when(F.col("t") > -math.inf, F.col("t")))).first()
        first = f" from t = {since if since is not None else -math.inf:g}" if count else ""
        _log.info(f"{loop} pass {p}: {rows(new)} {unit}, {count} changed{first} ({time.time() - t0:.1f}s)")
        for frame in (events, changed) if changed is not None else (events,):
            release(frame)
        if count == 0:
            release(diff)
            return Pass(new, out.frames), p
        events, changed = new, diff
    raise SuperstepBoundExceeded(f"{loop}: the {unit} still changed after {bound} passes (the loop's bound)")


def as_of(frame: DataFrame, node: str, at: str, versions: DataFrame, key: str = "node",
          start: str = "t_from", end: str = "t_to") -> DataFrame:
    """Left-join each row of `frame` with its node's version in force at its time (start <= at < end).

    `versions` holds, per node, the states that node went through, each with the interval it was in
    force; a row whose node has none in force at its time gets nulls in the versions' columns (its
    node is in its initial state). The versions' key and interval columns are dropped.
    """
    v = versions.withColumnRenamed(key, "_version_node")
    cond = (frame[node] == v["_version_node"]) & (v[start] <= frame[at]) & (frame[at] < v[end])
    return frame.join(v, cond, "left").drop("_version_node", start, end)


def merged(frame: DataFrame) -> DataFrame:
    """The frame in at most four partitions per core (fewer stay as they are), without a shuffle.

    A union has the partitions of all its parts, and a loop that unions the frames each pass derives
    would cut frames of dozens of partitions, mostly empty, then run a task for each of them in every
    stage that reads them: on small runs, most of a pass's time."""
    return frame.coalesce(frame.sparkSession.sparkContext.defaultParallelism * 4)


def _unsized(cut: DataFrame) -> DataFrame:
    """Return a locally checkpointed frame that reads the same cached blocks with no size estimate.

    A local checkpoint keeps the size (and the constraints) Spark derived from its plan, and Spark
    estimates a join as the product of its sides: for a state joined each superstep with a frame
    computed from itself, the estimate's digits grow by a factor each superstep, until planning a
    superstep takes longer than running it (seconds, then minutes). Without an estimate Spark
    assumes spark.sql.defaultSizeInBytes, as for any scan of an RDD; either way the frame is far
    above every size under which Spark would broadcast it, so the plans do not change.
    """
    plan = cut._jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() != "LogicalRDD":
        raise TypeError(f"not a locally checkpointed frame: its plan is a {plan.getClass().getSimpleName()}")
    jvm, session = cut.sparkSession._jvm, cut._jdf.sparkSession()
    none = jvm.scala.Option.empty()
    bare = plan.copy(plan.output(), plan.rdd(), plan.outputPartitioning(), plan.outputOrdering(),
                     plan.isStreaming(), plan.stream(), session, none, none)   # no stats, no constraints
    return DataFrame(jvm.org.apache.spark.sql.classic.Dataset.ofRows(session, bare), cut.sparkSession)


sizeless = _unsized   # for a protocol's own cuts of frames computed from themselves


def resident(frame: DataFrame, keys: tuple[str, ...], partitions: int) -> DataFrame:
    """Cache a loop's static frame hash-partitioned and sorted by the keys its supersteps join on.

    A superstep's join then shuffles and sorts only the messages in flight, never this frame:
    Spark keeps a cached frame's partitioning and order (a local checkpoint loses both) and
    shuffles the other side to match, also when `partitions` is below
    spark.sql.shuffle.partitions. The caller unpersists it when the loop is done.
    """
    out = frame.repartition(partitions, *keys).sortWithinPartitions(*keys).persist()
    rows(out)
    return out


def memory_for_cache(spark: SparkSession) -> int:
    """The bytes Spark may cache in memory, summed over its block managers (each one's unified memory)."""
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().valuesIterator()
    total = 0
    while status.hasNext():
        total += int(status.next()._1())
    return total


def cache_level(need: int, memory: int) -> StorageLevel:
    """The storage level for a cached frame of about `need` bytes, given `memory` bytes to cache in.

    Spark keeps a cached frame's blocks in memory and spills the rest to disk, and copies a block read
    back from disk into memory again (deserialized: a column batch at a time until memory runs out;
    serialized: whole, once storage memory is granted). Blocks of one frame never evict each other, so
    for a frame far larger than memory nearly every read of a block tries that copy, two tasks at a
    time, beside the blocks held and the tasks' own memory: at 40M nodes (a state of 23 GB against 4.6
    GB to cache in) the JVM's 8 GB heap ran out in both ways while tasks read such blocks. A frame of
    which memory would hold under a quarter is therefore kept on disk alone, read back as a stream.
    """
    return StorageLevel.MEMORY_AND_DISK_DESER if need <= 4 * memory else StorageLevel.DISK_ONLY


def hashed_by(frame: DataFrame, key: str) -> bool:
    """Whether Spark knows `frame` to be hash-partitioned by column `key` alone.

    True for a materialized cache of `repartition(n, key)`; before it is materialized, adaptive
    execution leaves a cached plan's partitioning unknown.
    """
    part = frame._jdf.queryExecution().sparkPlan().outputPartitioning()
    if part.getClass().getSimpleName() != "HashPartitioning" or part.expressions().size() != 1:
        return False
    expr = part.expressions().head()
    return expr.getClass().getSimpleName() == "AttributeReference" and expr.name() == key


def join_static(messages: DataFrame, count: int, frame: DataFrame, frame_rows: int,
                at: str, key: str) -> DataFrame:
    """Join `count` messages with a static frame of `frame_rows` rows on messages[at] == frame[key].

    When the frame is cached hash-partitioned by `key` (see `hashed_by`), the messages are hashed
    into its partitions and each task hashes the smaller side and streams the other through it,
    so the frame is never shuffled, sorted or broadcast: a superstep moves the messages only. (Left
    to itself, Spark sorts both sides for a merge join whenever the messages are too many to
    broadcast.) Any other frame is joined as Spark chooses.
    """
    if hashed_by(frame, key):
        if count <= frame_rows:
            messages = messages.hint("shuffle_hash")
        else:
            frame = frame.hint("shuffle_hash")
    return messages.join(frame, messages[at] == frame[key])


def rows(frame: DataFrame) -> int:
    """Count a frame's rows by running its plan once, without a final aggregate (materializes a cache).

    `DataFrame.count()` adds a global aggregate, two stages with a shuffle between them: a fixed cost
    per call that the supersteps of small runs pay often (bench/action_cost.py measures it).
    Cheapest on a checkpointed or cached frame; on any other it computes every column, which
    `count()` could prune, so it suits frames whose columns are few or computed anyway.
    """
    return int(frame._jdf.queryExecution().toRdd().count())


def release(frame: DataFrame) -> None:
    """Free the cached blocks behind a locally checkpointed frame (nothing else may read it later)."""
    plan = frame._jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)


PROTOCOL_LOGGERS = ("scribe_spark.bsp", "scribe_spark.pastry", "scribe_spark.scribe", "scribe_spark.tno",
                    "scribe_spark.reference")


@contextmanager
def quiet() -> Iterator[None]:
    """Hold back the protocols' progress lines (INFO) inside the block; warnings still show."""
    loggers = [logging.getLogger(name) for name in PROTOCOL_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
