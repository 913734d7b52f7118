"""churn's Scribe part: topics, subscribers and events; the SUBSCRIBEs that repair the trees; the
events' way down the trees, the heartbeats and their timeouts; per event and per bin.

With `topics` > 0, each topic has `subscribers` subscribers drawn among the members up at the start, and
its tree starts as the one Scribe builds on the overlay at the start (`begin`). Events are published as a
Poisson process by random members and routed to the topicId as the lookups are, in time, by the same run;
a root starts each down its tree, and parents send their children heartbeats (`scribe.timed`, with the
application's forward upcall if one is given). The SUBSCRIBEs of the children that declared their parent
dead and of the subscribers that came back (`subscribes`) are routed by the same run too, and grow the
trees from their hops (`hops`, `outcomes`); `churn` runs the rounds that settle them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from scribe_spark import bsp
from scribe_spark.config import ChurnParams
from scribe_spark.pastry import timed
from scribe_spark.pastry.kernels import Ring
from scribe_spark.pastry.overlay import Overlay
from scribe_spark.scribe import timed as scribe_timed
from scribe_spark.scribe.topics import Topics
from scribe_spark.scribe.trees import Trees, subscribe, subscriptions_frame
from scribe_spark.spark.arrow import local_frame
from scribe_spark.streams import Purpose, stream
from scribe_spark.workloads.scribe_groups import named_topics

DELIVERED = ("correct", "wrong")   # a route that ended at a node (the root, or another: then lost)
COPY_TYPES = {"event": np.int64, "node": np.int64, "t": np.float64}
TIMEOUT_TYPES = {"topic": np.int64, "parent": np.int64, "child": np.int64, "t": np.float64,
                 "t_gone": np.float64}   # t_gone: when the parent went (the edge's end)
PATH_SCHEMA = "topic long, path long, i long, node long, t double, t_done double"
LATENCY = "decimal(38, 12)"   # latencies summed exactly: up to 10^26 ms in all, to the picosecond


@dataclass(frozen=True)
class Events:
    """A run's topics, subscriptions (topic, node) and events (t_issue, src, key_hi, key_lo, topic)."""

    topics: Topics
    subscribers: pd.DataFrame
    published: pd.DataFrame


def workload(p: ChurnParams, absent: np.ndarray) -> Events | None:
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


def ends(got: timed.TimedRun, lookups: int, events: int) -> pd.DataFrame:
    """The events' routes' ends, from the run of `routed` (event: numbered from 0): the `events` routes
    after the `lookups` first."""
    done = got.lookups.iloc[lookups:lookups + events].reset_index(drop=True)
    return done.assign(event=np.arange(len(done), dtype=np.int64))


def first_goings(gone_spans: pd.DataFrame) -> pd.DataFrame:
    """(node, t_gone): when each node that went down within the run first did."""
    within = gone_spans[np.isfinite(gone_spans.down)]
    return within.groupby("node", as_index=False).down.min().rename(columns={"down": "t_gone"})


NO_TIMEOUTS = pd.DataFrame({"topic": np.zeros(0, np.int64), "child": np.zeros(0, np.int64),
                            "t": np.zeros(0, np.float64)})


def subscribes(events: Events, timeouts: pd.DataFrame, gone_spans: pd.DataFrame,
               until: float) -> pd.DataFrame:
    """The SUBSCRIBEs a run routes (t_issue, src, key_hi, key_lo, topic): each child that declared its parent
    dead re-subscribes then, and each subscriber that comes back re-subscribes at its return (it lost its
    place in the tree); in order of time, topic and node."""
    back = gone_spans[np.isfinite(gone_spans.down) & (gone_spans.up < until)]
    returns = events.subscribers.merge(back[["node", "up"]], on="node").rename(columns={"up": "t"})
    rows = pd.concat([returns[["topic", "node", "t"]],
                      timeouts.rename(columns={"child": "node"})[["topic", "node", "t"]]], ignore_index=True)
    rows = rows.astype({"topic": np.int64, "node": np.int64, "t": np.float64}).sort_values(
        ["t", "topic", "node"], kind="stable").reset_index(drop=True)
    topic = rows.topic.to_numpy(np.int64)
    return pd.DataFrame({"t_issue": rows.t.to_numpy(np.float64), "src": rows.node.to_numpy(np.int64),
                         "key_hi": events.topics.hi[topic], "key_lo": events.topics.lo[topic],
                         "topic": topic})


def hops(subs: pd.DataFrame, got: timed.TimedRun, first: int) -> pd.DataFrame | None:
    """The SUBSCRIBEs' hops (topic, path, i, node, t, t_done) from the run that routed `subs` from id
    `first` on (`t_done`: when Pastry delivered it at its last hop, NaN if it did not; None: no
    SUBSCRIBEs)."""
    if got.paths is None or not len(subs):
        return None
    path = got.paths.lid.to_numpy(np.int64) - first
    outcome = got.lookups.outcome.to_numpy()[first:]
    done = np.where(np.isin(outcome, DELIVERED), got.lookups.t_done.to_numpy(np.float64)[first:], np.nan)
    return pd.DataFrame({"topic": subs.topic.to_numpy(np.int64)[path], "path": path,
                         "i": got.paths.i.to_numpy(np.int64), "node": got.paths.node.to_numpy(np.int64),
                         "t": got.paths.t.to_numpy(np.float64),
                         "t_done": done[path]})


@dataclass
class Start:
    """The Scribe state a run starts from: the subscriptions, the trees Scribe builds on the overlay at the
    start, and those trees in time (`scribe.timed.at_start`)."""

    subs: DataFrame
    trees: Trees
    timed: scribe_timed.TimedTrees

    def release(self) -> None:
        """Free the cached frames."""
        free(self.trees.edges, self.trees.members, self.trees.roots, *self.timed.frames())


def begin(overlay: Overlay, events: Events, gone_spans: pd.DataFrame) -> Start:
    """Build the trees of the start, on the overlay at the start, and their holdings until each node first
    goes down."""
    spark = overlay.state.sparkSession
    subs = subscriptions_frame(spark, events.subscribers.topic, events.subscribers.node)
    trees = subscribe(overlay, events.topics, subs)
    gone = F.broadcast(local_frame(spark, first_goings(gone_spans), "node long, t_gone double"))
    return Start(subs, trees, scribe_timed.at_start(trees, gone))


def quiet_timeouts(overlay: Overlay, start: Start, hb: scribe_timed.Heartbeats) -> pd.DataFrame:
    """The heartbeat timeouts on the trees of the start if no event were published (`scribe.timed`)."""
    spark = overlay.state.sparkSession
    none = local_frame(spark, pd.DataFrame({"event": np.zeros(0, np.int64), "topic": np.zeros(0, np.int64),
                                            "node": np.zeros(0, np.int64), "t": np.zeros(0, np.float64)}),
                       "event long, topic long, node long, t double")
    return scribe_timed.timeouts(overlay, start.timed, none, hb)


def holders(timed: scribe_timed.TimedTrees, topics: Topics) -> pd.DataFrame:
    """Who holds which topic when, and which SUBSCRIBE hop made it (topic, key_hi, key_lo, node, t_from,
    t_to, by, hop), in order: where SUBSCRIBEs stop (`pastry.timed.simulate`)."""
    rows = timed.holds.toPandas().astype({"topic": np.int64, "node": np.int64, "by": np.int64,
                                          "hop": np.int64})
    rows = rows.sort_values(["topic", "node", "t_from"], kind="stable").reset_index(drop=True)
    topic = rows.topic.to_numpy(np.int64)
    return rows.assign(key_hi=topics.hi[topic], key_lo=topics.lo[topic])[
        ["topic", "key_hi", "key_lo", "node", "t_from", "t_to", "by", "hop"]]


@dataclass(frozen=True)
class Outcomes:
    """What the events and the heartbeats did: per event issued (by a live node), by event: t_issue,
    expected (its topic's subscribers up at its issue), reached (how many of those it reached) and their
    summed latency (ms); the heartbeats sent per bin; the heartbeat timeouts (topic, parent, child, t,
    t_gone); the tree edges of each parent that went, by its going (parent, t_gone, children); kept for the
    check, every copy that reached a node holding its topic (event, node, t), by event, node and time (else
    None); and the trees' holders, the orphans grafted back, and the SUBSCRIBE hops and acknowledgements
    sent per bin."""

    per_event: pd.DataFrame
    heartbeats: np.ndarray
    timeouts: pd.DataFrame
    orphaned: pd.DataFrame
    copies: pd.DataFrame | None
    holders: pd.DataFrame | None = None       # `holders` of the trees in time
    reconnected: pd.DataFrame | None = None   # topic, parent, t_gone, child, t: an orphan taken again
    subscribe_msgs: np.ndarray | None = None  # per bin: SUBSCRIBE hops sent (that arrived)
    acks: np.ndarray | None = None            # per bin: acknowledgements of the children taken


def outcomes(overlay: Overlay, start: Start, events: Events, done: pd.DataFrame, gone_spans: pd.DataFrame,
             hb: scribe_timed.Heartbeats, paths: pd.DataFrame | None = None, keep: bool = False,
             forward: scribe_timed.Forward | None = None, with_holders: bool = True) -> Outcomes:
    """Send the events down the trees (those of the start, changed by the SUBSCRIBEs of `paths` if any:
    `hops`), and count the heartbeats and timeouts (`forward`: the application's forward upcall on events,
    `scribe.timed.deliver`); the trees' holders only `with_holders`.

    The copies stay in Spark: only a row per event (and the copies, for the check) comes to the driver."""
    spark = overlay.state.sparkSession
    ended = done[done.outcome.isin(DELIVERED)]
    at_root = pd.DataFrame({"event": ended.event.to_numpy(np.int64),
                            "topic": events.published.topic.to_numpy(np.int64)[ended.event.to_numpy()],
                            "node": ended.dest.to_numpy(np.int64), "t": ended.t_done.to_numpy(np.float64)})
    frames: list[DataFrame] = []
    grown = paths is not None   # else the trees of the start: nobody taken again, no acknowledgement
    try:
        timed = start.timed
        if grown:
            grown = local_frame(spark, paths, PATH_SCHEMA)
            timed = scribe_timed.grafted(overlay, start.timed, grown, gone_spans, hb.hop_ms)
            frames += timed.frames()
        copies = scribe_timed.deliver(overlay, timed, local_frame(spark, at_root, "event long, topic long, "
                                                                  "node long, t double"), hb.hop_ms,
                                      hb.until, forward).localCheckpoint()
        frames.append(copies)
        taken = timed.edges.filter(F.col("t_from") > -math.inf).select("t_from").toPandas().t_from if grown \
            else np.zeros(0)
        return Outcomes(_per_event(spark, events, done, gone_spans, start.subs, copies),
                        scribe_timed.heartbeats(timed, copies, hb, forward),
                        scribe_timed.timeouts(overlay, timed, copies, hb, forward).astype(TIMEOUT_TYPES),
                        _orphaned(timed), _copies(copies) if keep else None,
                        holders(timed, events.topics) if with_holders else None,
                        _reconnected(timed) if grown else NONE_RECONNECTED,
                        _hops_sent(overlay.ring, paths, hb), hb.bins.count(taken))
    finally:
        free(*frames)


def free(*frames: DataFrame) -> None:
    """Free the frames' cached blocks: a cache's, or a local checkpoint's (`bsp.release`)."""
    for frame in frames:
        frame.unpersist()
        bsp.release(frame)


def _hops_sent(ring: Ring, paths: pd.DataFrame | None, hb: scribe_timed.Heartbeats) -> np.ndarray:
    """The SUBSCRIBE hops per bin of sending (a hop arrives a link and `hop_ms` after it is sent)."""
    if paths is None:
        return np.zeros(hb.bins.n, np.int64)
    hops = paths.sort_values(["path", "i"], kind="stable")
    before = hops.node.shift().to_numpy()
    on = hops.i.to_numpy() > 0
    link = ring.prox.dist(before[on].astype(np.int64), hops.node.to_numpy(np.int64)[on]).astype(np.float64)
    return hb.bins.count((hops.t.to_numpy(np.float64)[on] - link) - hb.hop_ms)


def _orphaned(timed: scribe_timed.TimedTrees) -> pd.DataFrame:
    """The tree edges of each parent that went within the run, by its going: (parent, t_gone, children)."""
    gone = timed.edges.filter(F.col("t_to") < math.inf)
    rows = gone.groupBy(F.col("dst").alias("parent"), F.col("t_to").alias("t_gone")).agg(
        F.count("*").alias("children")).toPandas()
    return rows.sort_values(["parent", "t_gone"], kind="stable").reset_index(drop=True)


NONE_RECONNECTED = pd.DataFrame({"topic": np.zeros(0, np.int64), "parent": np.zeros(0, np.int64),
                                 "t_gone": np.zeros(0), "child": np.zeros(0, np.int64), "t": np.zeros(0)})


def _reconnected(timed: scribe_timed.TimedTrees) -> pd.DataFrame:
    """Each child of a parent that went that some node took again for the topic since: (topic, parent,
    t_gone, child, t), t when it was first taken after the going."""
    gone = timed.edges.select("topic", F.col("src").alias("child"), F.col("dst").alias("parent"),
                              F.col("t_to").alias("t_gone")).filter(F.col("t_gone") < math.inf)
    taken = timed.edges.select("topic", F.col("src").alias("child"), F.col("t_from").alias("t"))
    rows = (gone.join(taken, ["topic", "child"]).filter(F.col("t") >= F.col("t_gone"))
            .groupBy("topic", "parent", "t_gone", "child").agg(F.min("t").alias("t")).toPandas())
    return rows.sort_values(["topic", "parent", "t_gone", "child"], kind="stable").reset_index(drop=True)


def _copies(copies: DataFrame) -> pd.DataFrame:
    """The copies (event, node, t), by event and node."""
    kept = copies.select("event", "node", "t").toPandas().astype(COPY_TYPES)
    return kept.sort_values(["event", "node", "t"], kind="stable").reset_index(drop=True)


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
    # a node a SUBSCRIBE grafted may get an event from its old parent and its new one: the first counts
    first = copies.groupBy("event", "node").agg(F.min("t").alias("t"))
    got = owed.join(first, ["event", "node"]).groupBy("event").agg(
        F.count("*").alias("reached"), F.sum(late).alias("latency"))
    rows = (out.join(owed.groupBy("event").agg(F.count("*").alias("expected")), "event", "left")
            .join(got, "event", "left")
            .select("event", "t_issue", F.coalesce("expected", F.lit(0)).alias("expected"),
                    F.coalesce("reached", F.lit(0)).alias("reached"),
                    F.coalesce(F.col("latency").cast("double"), F.lit(0.0)).alias("latency_ms")))
    return rows.toPandas().sort_values("event", kind="stable").reset_index(drop=True)


def bins(rows: pd.DataFrame, cut: timed.Bins) -> pd.DataFrame:
    """Per bin of `cut` by issue time: events published, the share of the expected deliveries made, mean
    latency."""
    n = cut.n
    by = rows.assign(bin=cut.of(rows.t_issue.to_numpy(np.float64))).groupby("bin")
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


@dataclass(frozen=True)
class Reference:
    """The sequential reference's Scribe: copies (event, node, t), heartbeats per bin and timeouts (topic,
    parent, child, t), as `Outcomes` orders them, and who held which topic when and which SUBSCRIBE hop
    made them: {(topic, node): [(from, to, SUBSCRIBE, hop), ...]} (-1, -1: from the start)."""

    copies: pd.DataFrame
    heartbeats: np.ndarray
    timeouts: pd.DataFrame
    holdings: dict[tuple[int, int], list[tuple[float, float, int, int]]]

    def holds(self, topic: int, v: int, t: float, path: int, hop: int) -> bool:
        """Whether v held the topic when hop `hop` of SUBSCRIBE `path` reached it at t (a holding made at t
        by a hop settled after that one does not count)."""
        held = self.holdings.get((topic, v), ())
        return any((a, by, made) < (t, path, hop) and t < b for a, b, by, made in held)


def _done(lookup: dict) -> float | None:
    """When the reference Pastry delivered a route (None: it did not)."""
    return lookup["t_done"] if lookup["outcome"] in DELIVERED else None


def reference_outcomes(ring: Ring, start: dict[int, tuple[list[int], list[int], list[int]]], events: Events,
                       ref, lookups: int, spans: list[tuple[int, float, float, bool]],
                       hb: scribe_timed.Heartbeats, subs: pd.DataFrame | None = None,
                       forward: Callable[[int, int, int, float], bool] | None = None) -> Reference:
    """The sequential reference's Scribe on the nodes' `start` states and the reference Pastry run `ref`:
    its routes of the events (after the `lookups` first) and of the SUBSCRIBEs `subs` (after the events),
    with their hops (`forward`: the forward upcall, as a predicate of event, topic, node and t). Without
    `ref`, the trees of the start alone."""
    from scribe_spark.reference import timed_events as refs
    from scribe_spark.reference.sequential_scribe import SequentialScribe

    scribe = SequentialScribe(ring, start, events.topics)
    for topic, node in zip(events.subscribers.topic.tolist(), events.subscribers.node.tolist()):
        scribe.subscribe(topic, node)
    topic, n = events.published.topic.tolist(), len(events.published)
    starts = [] if ref is None else [(i, topic[i], r["dest"], r["t_done"]) for i, r in
                                     enumerate(ref.lookups[lookups:lookups + n]) if r["outcome"] in DELIVERED]
    first = lookups + n
    asked = [] if subs is None else [(k, t, ref.paths.get(first + k, []), _done(ref.lookups[first + k]))
                                     for k, t in enumerate(subs.topic.tolist())]
    sim = refs.TimedEvents(scribe, lambda u, v: float(ring.prox.dist([u], [v])[0]), hb.hop_ms,
                           refs.first_goings(spans), hb.until, hb.period_ms, hb.timeout_ms,
                           lambda v: float(hb.phase(np.array([v]))[0]), forward,
                           [(v, down, up) for v, down, up, _g in spans])
    got = sim.run(starts, asked)
    copies = pd.DataFrame(got.copies, columns=["event", "node", "t"]).astype(COPY_TYPES)
    timeouts = pd.DataFrame(got.detections, columns=["topic", "parent", "child", "t"]).astype(
        {c: TIMEOUT_TYPES[c] for c in ("topic", "parent", "child", "t")})

    def ordered(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
        """The frame in the order `Outcomes` has it."""
        return frame.sort_values(by, kind="stable").reset_index(drop=True)
    return Reference(ordered(copies, ["event", "node", "t"]), hb.bins.count(got.heartbeats),
                     ordered(timeouts, ["topic", "parent", "child", "t"]),
                     sim.made_holdings())
