"""pastry_timed's Scribe part: topics, subscribers and events; the events' way down the trees, the heartbeats
and their timeouts; per event and per bin.

With `topics` > 0, each topic has `subscribers` subscribers drawn among the members up at the start, and
its tree is the one Scribe builds on the overlay at the start. Events are published as a Poisson process
by random members and routed to the topicId as the lookups are, in time, by the same run; the root starts
each down its tree, and parents send their children heartbeats (`scribe.timed`, with the application's
forward upcall if one is given).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from scribe_spark.config import PastryTimedParams
from scribe_spark.pastry import timed
from scribe_spark.pastry.kernels import Ring
from scribe_spark.pastry.overlay import Overlay
from scribe_spark.scribe import timed as scribe_timed
from scribe_spark.scribe.topics import Topics
from scribe_spark.scribe.trees import subscribe, subscriptions_frame
from scribe_spark.spark.arrow import local_frame
from scribe_spark.streams import Purpose, stream
from scribe_spark.workloads.scribe_groups import named_topics

DELIVERED = ("correct", "wrong")   # a route that ended at a node (the root, or another: then lost)
COPY_TYPES = {"event": np.int64, "node": np.int64, "t": np.float64}
TIMEOUT_TYPES = {"topic": np.int64, "parent": np.int64, "child": np.int64, "t": np.float64}
LATENCY = "decimal(38, 12)"   # latencies summed exactly: up to 10^26 ms in all, to the picosecond


@dataclass(frozen=True)
class Events:
    """A run's topics, subscriptions (topic, node) and events (t_issue, src, key_hi, key_lo, topic)."""

    topics: Topics
    subscribers: pd.DataFrame
    published: pd.DataFrame


def workload(p: PastryTimedParams, absent: np.ndarray) -> Events | None:
    """The topics, their subscribers among the members up at the start, and the events (None: no topics)."""
    if not p.topics:
        return None
    topics = named_topics(p)
    present = np.setdiff1d(np.arange(p.nodes, dtype=np.int64), absent)
    k = min(p.subscribers, len(present))
    rng = stream(p.seed, Purpose.SUBSCRIPTIONS, p.nodes)
    subs = pd.DataFrame({"topic": np.repeat(np.arange(p.topics, dtype=np.int64), k),
                         "node": np.concatenate([np.sort(rng.choice(present, k, replace=False))
                                                 for _ in range(p.topics)])})
    rng = stream(p.seed, Purpose.PUBLICATIONS, p.nodes)
    count = int(rng.poisson(p.publications_per_topic_s * p.topics * p.duration_s))
    topic = rng.integers(0, p.topics, count)
    published = pd.DataFrame({"t_issue": np.sort(rng.uniform(0.0, 1000.0 * p.duration_s, count)),
                              "src": rng.integers(0, p.nodes, count), "key_hi": topics.hi[topic],
                              "key_lo": topics.lo[topic], "topic": topic})
    return Events(topics, subs, published)


def routed(lookups: pd.DataFrame, events: Events | None) -> pd.DataFrame:
    """What the timed run routes: the lookups, then the events (to their topicIds)."""
    if events is None:
        return lookups
    return pd.concat([lookups, events.published[lookups.columns]], ignore_index=True)


def ends(got: timed.TimedRun, lookups: int) -> pd.DataFrame:
    """The events' routes' ends, from the run of `routed` (event: numbered from 0)."""
    done = got.lookups.iloc[lookups:].reset_index(drop=True)
    return done.assign(event=np.arange(len(done), dtype=np.int64))


def first_goings(gone_spans: pd.DataFrame) -> pd.DataFrame:
    """(node, t_gone): when each node that went down within the run first did."""
    within = gone_spans[np.isfinite(gone_spans.down)]
    return within.groupby("node", as_index=False).down.min().rename(columns={"down": "t_gone"})


@dataclass(frozen=True)
class Outcomes:
    """What the events and the heartbeats did: per event issued (by a live node), by event: t_issue,
    expected (its topic's subscribers up at its issue), reached (how many of those it reached) and their
    summed latency (ms); the heartbeats sent per bin; the heartbeat timeouts (topic, parent, child, t); the
    tree edges of each parent that went (parent, children); and, kept for the check, every copy that
    reached a node still in its tree (event, node, t), by event and node (else None)."""

    per_event: pd.DataFrame
    heartbeats: np.ndarray
    timeouts: pd.DataFrame
    orphaned: pd.DataFrame
    copies: pd.DataFrame | None


def outcomes(overlay: Overlay, events: Events, done: pd.DataFrame, gone_spans: pd.DataFrame,
             hb: scribe_timed.Heartbeats, keep: bool = False, forward: scribe_timed.Forward | None = None
             ) -> Outcomes:
    """Build the trees of the start, send the events down them, and count the heartbeats and timeouts
    (`forward`: the application's forward upcall on events, `scribe.timed.deliver`).

    The copies stay in Spark: only a row per event (and the copies, for the check) comes to the driver."""
    spark = overlay.state.sparkSession
    subs = subscriptions_frame(spark, events.subscribers.topic, events.subscribers.node)
    trees = subscribe(overlay, events.topics, subs)
    ended = done[done.outcome.isin(DELIVERED)]
    at_root = pd.DataFrame({"event": ended.event.to_numpy(np.int64),
                            "topic": events.published.topic.to_numpy(np.int64)[ended.event.to_numpy()],
                            "node": ended.dest.to_numpy(np.int64), "t": ended.t_done.to_numpy(np.float64)})
    gone = F.broadcast(local_frame(spark, first_goings(gone_spans), "node long, t_gone double"))
    frames: list[DataFrame] = [trees.edges, trees.members, trees.roots]
    try:
        copies = scribe_timed.deliver(overlay, trees, local_frame(spark, at_root, "event long, topic long, "
                                                                  "node long, t double"), gone, hb.hop_ms,
                                      hb.until, forward).localCheckpoint()
        frames.append(copies)
        orphaned = (trees.edges.join(gone.withColumnRenamed("node", "dst"), "dst")
                    .groupBy(F.col("dst").alias("parent")).agg(F.count("*").alias("children")).toPandas())
        return Outcomes(_per_event(spark, events, done, gone_spans, subs, copies),
                        scribe_timed.heartbeats(trees, copies, gone, hb, forward),
                        scribe_timed.timeouts(overlay, trees, copies, gone, hb,
                                              forward).astype(TIMEOUT_TYPES),
                        orphaned.sort_values("parent", kind="stable").reset_index(drop=True),
                        _copies(copies) if keep else None)
    finally:
        for frame in frames:
            frame.unpersist()


def _copies(copies: DataFrame) -> pd.DataFrame:
    """The copies (event, node, t), by event and node."""
    kept = copies.select("event", "node", "t").toPandas().astype(COPY_TYPES)
    return kept.sort_values(["event", "node"], kind="stable").reset_index(drop=True)


def _per_event(spark, events: Events, done: pd.DataFrame, gone_spans: pd.DataFrame, subs: DataFrame,
               copies: DataFrame) -> pd.DataFrame:
    """`outcomes`' rows per event. A subscriber is down at t if one of its outages has down <= t < up (as
    `timed.Downs`); latencies are summed as exact decimals, so that the sums do not depend on the order
    Spark adds them in (the partitioning)."""
    issued = np.flatnonzero(done.outcome.to_numpy() != "not_issued")
    pub = pd.DataFrame({"event": issued.astype(np.int64),
                        "topic": events.published.topic.to_numpy(np.int64)[issued],
                        "t_issue": events.published.t_issue.to_numpy(np.float64)[issued]})
    out = local_frame(spark, pub, "event long, topic long, t_issue double")
    spans = F.broadcast(local_frame(spark, gone_spans[["node", "down", "up"]],
                                    "node long, down double, up double").withColumnRenamed("node", "_v"))
    t = F.col("t_issue")
    down = (F.col("node") == F.col("_v")) & (F.col("down") <= t) & (t < F.col("up"))
    owed = out.join(subs, "topic").join(spans, down, "left_anti")
    late = (F.col("t") - t).cast(LATENCY)
    got = owed.join(copies.select("event", "node", "t"), ["event", "node"]).groupBy("event").agg(
        F.count("*").alias("reached"), F.sum(late).alias("latency"))
    rows = (out.join(owed.groupBy("event").agg(F.count("*").alias("expected")), "event", "left")
            .join(got, "event", "left")
            .select("event", "t_issue", F.coalesce("expected", F.lit(0)).alias("expected"),
                    F.coalesce("reached", F.lit(0)).alias("reached"),
                    F.coalesce(F.col("latency").cast("double"), F.lit(0.0)).alias("latency_ms")))
    return rows.toPandas().sort_values("event", kind="stable").reset_index(drop=True)


def bins(rows: pd.DataFrame, width: float, n: int) -> pd.DataFrame:
    """Per bin of issue time: events published, the share of the expected deliveries made, mean latency."""
    at = np.minimum((rows.t_issue.to_numpy(np.float64) // width).astype(int), n - 1)
    by = rows.assign(bin=at).groupby("bin")
    sums = by[["expected", "reached", "latency_ms"]].sum().reindex(np.arange(n), fill_value=0)
    count = by.size().reindex(np.arange(n), fill_value=0)
    return pd.DataFrame({"publications": count.to_numpy(np.int64),
                         "event_delivery_ratio": ratio(sums.reached, sums.expected),
                         "event_latency_ms_mean": ratio(sums.latency_ms, sums.reached)})


def none(n: int) -> pd.DataFrame:
    """The columns of `bins` for a run without topics."""
    return pd.DataFrame({"publications": np.zeros(n, np.int64), "event_delivery_ratio": np.full(n, math.nan),
                         "event_latency_ms_mean": np.full(n, math.nan)})


def ratio(a, b) -> np.ndarray:
    """a / b element by element (arrays or series), NaN where b is 0."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.divide(a, b, out=np.full(len(a), math.nan), where=b > 0)


def reference_outcomes(ring: Ring, start: dict[int, tuple[list[int], list[int], list[int]]], events: Events,
                       ref_lookups: list[dict], lookups: int, spans: list[tuple[int, float, float, bool]],
                       hb: scribe_timed.Heartbeats,
                       forward: Callable[[int, int, int, float], bool] | None = None
                       ) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame]:
    """The sequential reference's copies (event, node, t), heartbeats per bin and timeouts (topic, parent,
    child, t), from the nodes' `start` states and the reference run's routes (`ref_lookups`, the events'
    after the `lookups` first), as `Outcomes` orders them (`forward`: the forward upcall, as a predicate of
    event, topic, node and t)."""
    from scribe_spark.reference import timed_events as ref
    from scribe_spark.reference.sequential_scribe import SequentialScribe

    scribe = SequentialScribe(ring, start, events.topics)
    for topic, node in zip(events.subscribers.topic.tolist(), events.subscribers.node.tolist()):
        scribe.subscribe(topic, node)
    topic = events.published.topic.tolist()
    starts = [(i, topic[i], r["dest"], r["t_done"]) for i, r in enumerate(ref_lookups[lookups:])
              if r["outcome"] in DELIVERED]
    sim = ref.TimedEvents(scribe, lambda u, v: float(ring.prox.dist([u], [v])[0]), hb.hop_ms,
                          ref.first_goings(spans), hb.until, hb.period_ms, hb.timeout_ms,
                          lambda v: float(hb.phase(np.array([v]))[0]), forward)
    got = sim.run(starts)
    copies = pd.DataFrame(got.copies, columns=["event", "node", "t"]).astype(COPY_TYPES)
    timeouts = pd.DataFrame(got.detections, columns=["topic", "parent", "child", "t"]).astype(TIMEOUT_TYPES)
    return (copies.sort_values(["event", "node"], kind="stable").reset_index(drop=True),
            hb.bins.count(got.heartbeats),
            timeouts.sort_values(["topic", "parent", "child"], kind="stable").reset_index(drop=True))
