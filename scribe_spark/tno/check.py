"""The TNO safety check as a Spark computation over the subscribers' notification logs.

Two subscribers violate total notification order when they were notified of two common events
in different orders. Comparing every pair of subscribers on every pair of common events grows
with subscribers² × events²; this check is exact without doing that. Fix one reference order R
of the events (any order gives the same answer; one close to the subscribers' orders is cheap:
the events sorted by their mean notification time). A subscriber *inverts* a pair
{x, y} when it was notified of them against R. Two subscribers order a common pair differently
exactly when one of them inverts it and the other does not, so every disagreement is found
once, from the side that inverts it. Per pair {x, y} that k subscribers invert and b are
notified of (both events), the disagreements number k (b - k), counted without listing them;
the violating subscriber pairs are the distinct (inverter, non-inverter) pairs over all such
{x, y}, listed and deduplicated. The work is the notifications, per distinct inverted pair the
subscribers notified of its first event, and the disagreements themselves — nothing beyond the
notifications when TNO holds.
`reference.pairwise_order` is the direct comparison the tests check this against.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

SUB, EVENT, POS, AT, RANK = "sub", "event", "pos", "at", "rank"
NOTIFICATIONS = T.StructType([T.StructField(SUB, T.LongType(), False),
                              T.StructField(EVENT, T.LongType(), False),
                              T.StructField(POS, T.IntegerType(), False),
                              T.StructField(AT, T.DoubleType(), False)])
RANKS = T.StructType([T.StructField(EVENT, T.LongType(), False), T.StructField(RANK, T.IntegerType(), False)])
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
    pdf = pd.DataFrame({SUB: subs, EVENT: events, POS: pos.astype(np.int32), AT: at})
    return spark.createDataFrame(pdf, NOTIFICATIONS)


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
    order = notifications.groupBy(EVENT).agg(F.avg(AT).alias("key")).toPandas().sort_values(["key", EVENT])
    ranked = pd.DataFrame({EVENT: order[EVENT].to_numpy(np.int64),
                           RANK: np.arange(len(order), dtype=np.int32)})
    return notifications.sparkSession.createDataFrame(ranked, RANKS)


def check_tno(notifications: DataFrame, subscribers: int, undelivered: int = 0) -> CheckResult:
    """Check TNO on `notifications_frame` rows (sub, event, pos, at), each event at most once per subscriber.

    `subscribers` counts every subscriber, those notified of nothing included (they form pairs too).
    """
    held = (notifications.join(F.broadcast(reference_ranks(notifications)), EVENT)
            .select(SUB, POS, RANK).localCheckpoint())
    inverted = inverted_frame(held).localCheckpoint()
    # per pair {x, y} that someone inverts: the subscribers notified of both, and whether each inverts it
    pairs = inverted.groupBy("x", "y").agg(F.count("*").alias("k"))
    has = held.select(F.col(SUB).alias("t"), F.col(RANK))
    both = (pairs.select("x", "y").join(has.withColumnRenamed(RANK, "x"), "x")
            .join(has.withColumnRenamed(RANK, "y"), ["y", "t"], "left_semi").localCheckpoint())
    # a subscriber that inverts a pair disagrees on it with each one notified of both that does not
    count = (both.groupBy("x", "y").agg(F.count("*").alias("both")).join(pairs, ["x", "y"])
             .agg(F.sum(F.col("k") * (F.col("both") - F.col("k"))).alias("inverted")).first())
    others = both.join(inverted.withColumnRenamed(SUB, "t"), ["t", "x", "y"], "left_anti")
    violating = (inverted.join(others, ["x", "y"])
                 .select(F.least(SUB, "t").alias("a"), F.greatest(SUB, "t").alias("b")).distinct().count())
    for frame in (held, inverted, both):
        frame.unpersist()
    return CheckResult(subscribers * (subscribers - 1) // 2, int(violating), int(count["inverted"] or 0),
                       undelivered)
