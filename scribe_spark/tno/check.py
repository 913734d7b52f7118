"""The TNO safety check as a Spark computation over the subscribers' notification logs.

Two subscribers violate total notification order when they were notified of two common events
in different orders. Comparing every pair of subscribers on every pair of common events grows
with subscribers² × events²; this check is exact without doing that. Fix one reference order R
of the events (any order gives the same answer; one close to the subscribers' orders is cheap:
the events sorted by their mean notification time). A subscriber *inverts* a pair
{x, y} when it was notified of them against R. Two subscribers order a common pair differently
exactly when one of them inverts it and the other does not, so every disagreement is found
once, from the side that inverts it. Per pair {x, y} that k subscribers invert and b are
notified of (both events), the disagreements number k (b - k); the violating subscriber pairs are
the distinct (inverter, non-inverter notified of both) pairs over all such {x, y}.

Neither is listed. Each event's subscribers are one row of bits (`has`, events × subscribers / 8
bytes, made on the driver from the collected notifications and shared once per machine as a
memory-mapped file, `spark/shared.py`). The inverted pairs are grouped by {x, y} over Spark
tasks; a task finds b as the bits of has[x] & has[y], and ORs has[x] & has[y] & ~inverters into
a bit row per inverter (the subscribers it disagrees with).
The driver ORs the tasks' rows and counts the pairs set in either direction. Work: the
notifications, the inverted pairs, and per inverted pair and per inverter one bit row; when TNO
holds, the notifications and `has` only. Memory: `has` on the driver and once per machine (mapped);
per task a few arrays of up to `CHUNK_BYTES` and subscribers² / 8 bytes; on the driver up to
(tasks + 1) × subscribers² / 8 bytes.
`reference.pairwise_order` is the direct comparison the tests check this against.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark import Broadcast
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from scribe_spark import bsp
from scribe_spark.columns import TIME
from scribe_spark.spark.arrow import local_frame
from scribe_spark.spark.shared import release, share

SUB, EVENT, POS, RANK = "sub", "event", "pos", "rank"
NOTIFICATIONS = T.StructType([T.StructField(SUB, T.LongType(), False),
                              T.StructField(EVENT, T.LongType(), False),
                              T.StructField(POS, T.IntegerType(), False),
                              T.StructField(TIME, T.DoubleType(), False)])
RANKS = T.StructType([T.StructField(EVENT, T.LongType(), False), T.StructField(RANK, T.IntegerType(), False)])
DISAGREEMENTS = T.StructType([T.StructField(SUB, T.LongType(), False),
                              T.StructField("bits", T.BinaryType(), False),
                              T.StructField("disagreements", T.LongType(), False)])
DISAGREEMENTS_ARROW = to_arrow_schema(DISAGREEMENTS)
INVERTED = T.StructType([T.StructField(SUB, T.LongType(), False), T.StructField("x", T.IntegerType(), False),
                         T.StructField("y", T.IntegerType(), False)])


@dataclass
class CheckResult:
    subscriber_pairs: int
    violating_pairs: int          # subscriber pairs that saw two common events in different orders
    inverted_event_pairs: int     # summed over subscriber pairs
    undelivered: int              # events a subscriber received but never notified (buffered at the end)

    @property
    def tno_holds(self) -> bool:
        """Safety: no two subscribers were notified of two common events in different orders."""
        return self.violating_pairs == 0

    @property
    def ok(self) -> bool:
        """Safety and liveness: TNO holds and every received event was notified."""
        return self.tno_holds and self.undelivered == 0


def notifications_frame(spark: SparkSession, logs: dict[int, list[int]],
                        times: dict[int, list[float]] | None = None) -> DataFrame:
    """Return the logs as rows (sub, event, pos, at): `sub` was notified of `event` at position `pos`.

    `at` is the notification time when `times` gives it (the same shape as `logs`), else the
    relative position in the log; it only picks the reference order, never the result.
    """
    lens = np.fromiter((len(log) for log in logs.values()), dtype=np.int64, count=len(logs))
    subs = np.repeat(np.fromiter(logs, dtype=np.int64, count=len(logs)), lens)
    events = np.fromiter((e for log in logs.values() for e in log), dtype=np.int64, count=int(lens.sum()))
    pos = np.arange(len(events), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
    if times is None:
        at = pos / np.repeat(np.maximum(lens, 1), lens)
    else:
        at = np.fromiter((x for s in logs for x in times[s]), dtype=np.float64, count=len(events))
    pdf = pd.DataFrame({SUB: subs, EVENT: events, POS: pos.astype(np.int32), TIME: at})
    return local_frame(spark, pdf, NOTIFICATIONS)


def inverted_pairs(ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (x, y) for every pair notified against the reference order: y came first, x < y in rank."""
    if len(ranks) < 2:
        return np.empty(0, np.int32), np.empty(0, np.int32)
    before = np.maximum.accumulate(ranks)[:-1]          # the highest rank notified before position j
    xs, ys = [], []
    for j in np.flatnonzero(ranks[1:] < before) + 1:   # only these positions have an earlier, higher rank
        higher = ranks[:j][ranks[:j] > ranks[j]]
        xs.append(np.full(len(higher), ranks[j], dtype=np.int32))
        ys.append(higher.astype(np.int32))
    if not xs:
        return np.empty(0, np.int32), np.empty(0, np.int32)
    return np.concatenate(xs), np.concatenate(ys)


def _inverted_rows(pdf: pd.DataFrame) -> pd.DataFrame:
    """One subscriber's notifications (sub, pos, rank) -> its inverted pairs as rows (sub, x, y)."""
    x, y = inverted_pairs(pdf.sort_values(POS)[RANK].to_numpy(np.int32))
    return pd.DataFrame({SUB: np.full(len(x), pdf[SUB].iloc[0], dtype=np.int64), "x": x, "y": y})


def inverted_frame(held: DataFrame) -> DataFrame:
    """Rows (sub, pos, rank) -> rows (sub, x, y): the ranks x < y of which `sub` was notified of y first."""
    return held.groupBy(SUB).applyInPandas(_inverted_rows, INVERTED)


def reference_ranks(notifications: DataFrame) -> DataFrame:
    """Return rows (event, rank): the events ranked by their mean notification time `at`, then id."""
    order = notifications.groupBy(EVENT).agg(F.avg(TIME).alias("key")).toPandas().sort_values(["key", EVENT])
    ranked = pd.DataFrame({EVENT: order[EVENT].to_numpy(np.int64),
                           RANK: np.arange(len(order), dtype=np.int32)})
    return local_frame(notifications.sparkSession, ranked, RANKS)


def _bits(index: np.ndarray, width: int, rows: np.ndarray, nrows: int) -> np.ndarray:
    """Return an (nrows, width) uint8 bit matrix with bit index[i] set in row rows[i] (bit j: byte j >> 3)."""
    out = np.zeros(nrows * width, dtype=np.uint8)
    np.bitwise_or.at(out, rows * width + (index >> 3), (1 << (index & 7)).astype(np.uint8))  # flat: faster
    return out.reshape(nrows, width)


CHUNK_BYTES = 1 << 26     # bytes of bit rows a disagreement task gathers at once (it holds a few such arrays)


def _disagreement_task(has_bc: Broadcast, subs_bc: Broadcast, ranks: int,
                       chunk_bytes: int) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Return a mapInArrow task: inverted rows (sub, x, y), whole (x, y) groups -> per subscriber the
    subscribers it disagrees with (a bit row) and, on the first row, the disagreements counted."""
    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        has, subs = has_bc.value, subs_bc.value         # has[rank]: bit row of the subscribers notified
        width = has.shape[1]
        cols = [(b.column(0).to_numpy(), b.column(1).to_numpy(), b.column(2).to_numpy()) for b in batches]
        sub = np.searchsorted(subs, np.concatenate([c[0] for c in cols] or [np.empty(0, np.int64)]))
        if not len(sub):
            return
        x, y = (np.concatenate([c[i] for c in cols]).astype(np.int64) for i in (1, 2))
        pair = x * ranks + y
        order = np.argsort(pair, kind="stable")
        sub, pair = sub[order], pair[order]
        starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
        ends = np.r_[starts[1:], len(pair)]
        seen = np.zeros((len(subs), width), dtype=np.uint8)    # seen[s]: the subscribers s disagrees with
        disagreements = 0
        step, lo = max(1, chunk_bytes // width), 0
        while lo < len(starts):          # pairs lo:hi, rows a:b: at most `step` rows unless one pair has more
            hi = max(lo + 1, int(np.searchsorted(ends, starts[lo] + step, side="right")))
            a, b = starts[lo], ends[hi - 1]
            px, py = np.divmod(pair[starts[lo:hi]], ranks)
            both = has[px] & has[py]                           # notified of both events of the pair
            k = ends[lo:hi] - starts[lo:hi]                    # inverters of the pair
            disagreements += int((k * (np.bitwise_count(both).sum(axis=1, dtype=np.int64) - k)).sum())
            local = np.repeat(np.arange(hi - lo), k)
            others = both & ~_bits(sub[a:b], width, local, hi - lo)   # notified of both, not inverting
            by_sub = np.argsort(sub[a:b], kind="stable")
            s = sub[a:b][by_sub]
            first = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
            seen[s[first]] |= np.bitwise_or.reduceat(others[local[by_sub]], first, axis=0)
            lo = hi
        rows = np.flatnonzero(seen.any(axis=1))
        yield pa.RecordBatch.from_arrays([pa.array([-1], pa.int64()), pa.array([b""], pa.binary()),
                                          pa.array([disagreements], pa.int64())], schema=DISAGREEMENTS_ARROW)
        per_batch = max(1, (1 << 30) // width)                # binary offsets are 32-bit: < 2 GiB a batch
        for i in range(0, len(rows), per_batch):
            r = rows[i:i + per_batch]
            columns = [pa.array(r, pa.int64()), _fixed_binary(seen[r]), pa.array(np.zeros(len(r), np.int64))]
            yield pa.RecordBatch.from_arrays(columns, schema=DISAGREEMENTS_ARROW)
    return task


def _fixed_binary(rows: np.ndarray) -> pa.BinaryArray:
    """Return the rows of a 2-d uint8 array as an Arrow binary array, one value per row."""
    offsets = np.arange(len(rows) + 1, dtype=np.int32) * rows.shape[1]
    return pa.BinaryArray.from_buffers(pa.binary(), len(rows), [None, pa.py_buffer(offsets),
                                                                pa.py_buffer(np.ascontiguousarray(rows))])


def _binary_rows(values: pa.BinaryArray, width: int) -> np.ndarray:
    """Return a binary array's values (each empty or `width` bytes) as the rows of a 2-d uint8 array."""
    _, offsets, data = values.buffers()
    offs = np.frombuffer(offsets, dtype=np.int32)[values.offset:values.offset + len(values) + 1]
    if data is None or offs[-1] == offs[0]:
        return np.empty((0, width), dtype=np.uint8)
    return np.frombuffer(data, dtype=np.uint8)[offs[0]:offs[-1]].reshape(-1, width)


def pairs_in_either(seen: np.ndarray, block: int = 4096) -> int:
    """Return how many unordered pairs {s, t} have bit t of row s or bit s of row t set (diagonal clear)."""
    n = seen.shape[0]
    block = -(-block // 8) * 8                  # whole bytes of columns per block
    total = 0
    for i in range(0, n, block):
        cols = np.unpackbits(seen[:, i // 8:(i + block) // 8], axis=1, count=min(block, n - i),
                             bitorder="little")
        theirs = np.packbits(cols.T, axis=1, bitorder="little")     # rows i:i + block of the transpose
        total += int(np.bitwise_count(seen[i:i + block] | theirs).sum())
    return total // 2


def check_tno(notifications: DataFrame, subscribers: int, undelivered: int = 0,
              chunk_bytes: int = CHUNK_BYTES) -> CheckResult:
    """Check TNO on `notifications_frame` rows (sub, event, pos, at), each event at most once per subscriber.

    `subscribers` counts every subscriber, those notified of nothing included (they form pairs too).
    `chunk_bytes` bounds the bit rows a task gathers at once (tests make it tiny).
    """
    spark = notifications.sparkSession
    held = (notifications.join(F.broadcast(reference_ranks(notifications)), EVENT)
            .select(SUB, POS, RANK).localCheckpoint())
    table = held.select(SUB, RANK).toArrow()
    sub, rank = table.column(SUB).to_numpy(), table.column(RANK).to_numpy().astype(np.int64)
    subs = np.unique(sub)
    ranks = int(rank.max()) + 1 if len(rank) else 0
    # has[r]: the subscribers notified of the event ranked r, one bit each (the task's side input)
    has = _bits(np.searchsorted(subs, sub), (len(subs) + 7) // 8, rank, ranks)
    has_bc, subs_bc = share(spark.sparkContext, has), share(spark.sparkContext, subs)   # once per machine
    try:
        inverted = inverted_frame(held).repartition("x", "y")
        task = _disagreement_task(has_bc, subs_bc, ranks, chunk_bytes)
        got = inverted.mapInArrow(task, DISAGREEMENTS).toArrow()
    finally:
        for bc in (has_bc, subs_bc):
            release(bc)
    seen = np.zeros_like(has, shape=(len(subs), has.shape[1]))
    for batch in got.to_batches():
        r = batch.column(0).to_numpy()
        np.bitwise_or.at(seen, r[r >= 0], _binary_rows(batch.column(1), seen.shape[1]))   # -1: no bits
    bsp.release(held)
    violating = pairs_in_either(seen) if seen.any() else 0
    return CheckResult(subscribers * (subscribers - 1) // 2, violating,
                       int(got.column("disagreements").to_numpy().sum()), undelivered)
