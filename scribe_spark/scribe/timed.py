"""Scribe in simulated time: trees that change in time, events down them, heartbeats, their timeouts.

The trees start as those Scribe builds on the overlay at the start (`trees.subscribe`, `at_start`), and
change as SUBSCRIBEs routed by Pastry in time reach them (`grafted`): trees in time are tables of who
holds which topic when, which edges are in force when, and which nodes are roots when (`TimedTrees`). An
event reaches its topic's root by Pastry in time (`pastry.timed`, routed as a lookup of the topicId). A
node holds its Scribe state from the start (or from the SUBSCRIBE that gave it) until it next goes down:
one that went down has lost it, so an event reaching it is dropped with the copies it would have sent on.

A parent sends each child a heartbeat at each of its ticks (phase + k T_hb) unless it sent it an event's
copy since the tick before; a child that hears nothing from its parent (heartbeat, copy or the
acknowledgement of its graft) for T_hbf declares it dead (the fault upcall). Heartbeats and timeouts are
computed in closed form from each edge's parent's ticks and the copies it sent, not sent one by one; the
sequential reference (`reference/timed_events`) sends them one by one, and the two must agree.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from scribe_spark import bsp
from scribe_spark.columns import NODE, TOPIC
from scribe_spark.pastry.overlay import DST, SRC, Overlay, state_partitions, with_distance
from scribe_spark.pastry.timed import Bins, first_ticks, guess_ticks, keepalive_phase
from scribe_spark.scribe.trees import Trees, multicast

EVENT, T_AT, GONE = "event", "t", "t_gone"
FROM, TO, HEARD = "t_from", "t_to", "t_heard"
# the application's forward upcall on events (Scribe's forwardHandler): a condition on a copy's event, topic,
# node and time (columns event, topic, node, t) that holds for the copies their nodes send on; a condition,
# not a function of frames, so that it decides each copy alone, whatever rows it is evaluated with
Forward = Column
HEARTBEAT_SALT = 0x5C81BE   # heartbeat phases are drawn apart from the keep-alives'


@dataclass(frozen=True)
class Heartbeats:
    """The heartbeat timers (ms) and the seed of their phases; `until` ends the run, `bin_ms` its bins."""

    period_ms: float
    timeout_ms: float
    seed: int
    hop_ms: float
    until: float
    bin_ms: float

    def __post_init__(self) -> None:
        if not self.timeout_ms >= 2 * self.period_ms:   # else a live parent's child could time out
            raise ValueError(f"the heartbeat timeout ({self.timeout_ms:g} ms) must be at least twice the "
                             f"period ({self.period_ms:g} ms): the closed form declares only parents that "
                             "stopped")

    @property
    def bins(self) -> Bins:
        """The run's bins (those the Pastry run counts its maintenance in)."""
        return Bins(self.until, self.bin_ms)

    def phase(self, nodes: np.ndarray) -> np.ndarray:
        """Each node's first heartbeat tick, uniform in [0, period), from the seed and the node alone."""
        return keepalive_phase(nodes, self.seed ^ HEARTBEAT_SALT, self.period_ms)

    def first_tick(self, nodes: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Per node, the number of its first tick at or after t (ticks computed as phase + k period; tick 0
        for any t up to 0, -inf included, as ticks start in [0, period); the run's end for t = inf)."""
        phase, t = self.phase(nodes), np.maximum(np.asarray(t, np.float64), 0.0)
        fin = np.where(np.isfinite(t), t, self.until)
        return first_ticks(phase, self.period_ms, lambda s, i: s >= fin[i], guess_ticks(fin, phase,
                                                                                          self.period_ms))

    def tick(self, nodes: np.ndarray, k: np.ndarray) -> np.ndarray:
        """The time of each node's k-th tick."""
        return self.phase(nodes) + k * self.period_ms


@dataclass
class TimedTrees:
    """Scribe's trees as they change in time (all times in ms).

    - `holds` (topic, node, t_from, t_to, by, hop): a node holds the topic's state in [t_from, t_to): it
      delivers the copies that reach it then and sends them on; the intervals of a (topic, node) do not
      overlap; `by` and `hop` name the SUBSCRIBE hop that made it hold (-1: it held from the start).
    - `edges` (topic, src = child, dst = parent, t_from, t_to, t_heard): the parent sends the child the
      copies and heartbeats of [t_from, t_to) (from when it took the child to when it stops holding the
      topic); the child first hears from it at t_heard.
    - `roots` (topic, node, t_from, t_to): an event whose route ends at the node then starts down the tree.
    """

    holds: DataFrame
    edges: DataFrame
    roots: DataFrame

    def frames(self) -> list[DataFrame]:
        """The frames to release when done."""
        return [self.holds, self.edges, self.roots]


def at_start(trees: Trees, gone: DataFrame) -> TimedTrees:
    """The trees Scribe built at the start, in time: each member holds its state from the start until it
    first goes down (`gone`: node, t_gone), each parent sends its children until then, each child heard
    from its parent at 0, and the root is the root until then."""
    ends = F.broadcast(gone.select(NODE, GONE))
    until = F.coalesce(F.col(GONE), F.lit(math.inf))
    none = F.lit(-1).cast("long")
    holds = trees.members.select(TOPIC, NODE).join(ends, NODE, "left").select(
        TOPIC, NODE, F.lit(-math.inf).alias(FROM), until.alias(TO), none.alias("by"), none.alias("hop"))
    edges = trees.edges.select(TOPIC, SRC, DST).join(ends.withColumnRenamed(NODE, DST), DST, "left").select(
        TOPIC, SRC, DST, F.lit(-math.inf).alias(FROM), until.alias(TO), F.lit(0.0).alias(HEARD))
    roots = trees.roots.select(TOPIC, NODE).join(ends, NODE, "left").select(
        TOPIC, NODE, F.lit(-math.inf).alias(FROM), until.alias(TO))
    return TimedTrees(holds.localCheckpoint(), edges.localCheckpoint(), roots.localCheckpoint())


def grafted(overlay: Overlay, start: TimedTrees, paths: DataFrame, spans: pd.DataFrame,
            hop_ms: float) -> TimedTrees:
    """The trees after the SUBSCRIBEs of `paths` (topic, path, i, node, t, t_done: hop i of each, i = 0 its
    subscriber at its issue; `t_done`: when Pastry delivered it at its last hop, NaN if not), on nodes that go
    down and come back as `spans` (node, down, up) say. Each topic's SUBSCRIBEs settle in time order
    (`settle_topic`); a parent's acknowledgement reaches its new child a link and `hop_ms` after the graft.
    """
    def marked(frame: DataFrame, mark: int) -> DataFrame:
        """Holdings or roots as `settle_topic` reads them."""
        return frame.select(TOPIC, NODE, F.lit(mark).cast("long").alias("parent"), FROM, TO)
    keyed = paths.select(TOPIC).distinct()
    state = (marked(start.holds, HELD).unionByName(marked(start.roots, ROOTED))
             .unionByName(start.edges.select(TOPIC, F.col(SRC).alias(NODE), F.col(DST).alias("parent"), FROM,
                                             TO))
             .join(F.broadcast(keyed), TOPIC, "left_semi"))
    outages = spans[["node", "down", "up"]].copy()

    def settle(hops: pd.DataFrame, held: pd.DataFrame) -> pd.DataFrame:
        """One topic's group: its SUBSCRIBE hops and its trees so far."""
        return settle_topic(hops, held, outages)
    new = paths.groupBy(TOPIC).cogroup(state.groupBy(TOPIC)).applyInPandas(settle, SETTLED).localCheckpoint()
    try:
        edges = with_distance(overlay, new.filter(F.col("kind") == "edge"), "parent", NODE, "_d").select(
            TOPIC, F.col(NODE).alias(SRC), F.col("parent").alias(DST), FROM, TO,
            (F.col(FROM) + F.col("_d") + F.lit(float(hop_ms))).alias(HEARD))

        def of(kind: str, *more: str) -> DataFrame:
            """The new rows of a kind."""
            return new.filter(F.col("kind") == kind).select(TOPIC, NODE, FROM, TO, *more)
        return TimedTrees(start.holds.unionByName(of("hold", "by", "hop")).localCheckpoint(),
                          _renewed(start.edges.unionByName(edges), new).localCheckpoint(),
                          start.roots.unionByName(of("root")).localCheckpoint())
    finally:
        bsp.release(new)


def _renewed(edges: DataFrame, settled: DataFrame) -> DataFrame:
    """The edges, each that a parent took again (`settle_topic`'s "renew" rows) ending then."""
    renew = settled.filter(F.col("kind") == "renew").select(
        TOPIC, F.col(NODE).alias(SRC), F.col("parent").alias(DST), FROM, F.col(TO).alias("_renew"))
    out = edges.join(F.broadcast(renew), [TOPIC, SRC, DST, FROM], "left")
    end = F.least(F.col(TO), F.coalesce("_renew", F.col(TO)))
    return out.select(TOPIC, SRC, DST, FROM, end.alias(TO), HEARD)


SETTLED = (f"{TOPIC} long, kind string, {NODE} long, parent long, {FROM} double, {TO} double, by long, "
           "hop long")
HELD, ROOTED = -1, -2   # `settle_topic`'s rows of holdings and roots (the others are edges, with a parent)


def settle_topic(hops: pd.DataFrame, held: pd.DataFrame, spans: pd.DataFrame) -> pd.DataFrame:
    """One topic's SUBSCRIBEs, hop by hop in order of (t, path, i), on its trees so far (`held`: a row per
    holding with parent HELD, per root with parent ROOTED, per edge child -> parent): the new holdings, edges
    and roots (`SETTLED`).

    A hop at a node down at its time ends its SUBSCRIBE there. The subscriber (hop 0) holds the topic from
    the issue if it did not. At a later hop the node takes the hop before as a child, unless that child is
    the node's ancestor then (a loop); a parent that has that child already renews the edge (the old one
    ends then). If the node held the topic the SUBSCRIBE stops there (a graft); else the node holds the
    topic from then and the SUBSCRIBE goes on. A node at which Pastry delivered a SUBSCRIBE (at `t_done`,
    its last hop's time or, after timeouts there, later; NaN: not delivered) is a root from that delivery.
    A holding lasts until the node next goes down; an edge as long as its parent's holding.
    """
    columns = ["topic", "kind", "node", "parent", "t_from", "t_to", "by", "hop"]
    if hops.empty:
        return pd.DataFrame(columns=columns)
    topic = int(hops.topic.iloc[0])
    tree = _Tree(held, spans)
    out: list[tuple] = []
    prev: dict[int, int] = {}
    last = hops.groupby("path").i.transform("max")
    order = hops.assign(last=last == hops.i).sort_values(["t", "path", "i"], kind="stable")
    for path, i, v, t, done, is_last in zip(order.path.tolist(), order.i.tolist(), order.node.tolist(),
                                            order.t.tolist(), order.t_done.tolist(), order["last"].tolist()):
        if path not in prev and i > 0 or tree.down(v, t):
            prev.pop(path, None)
            continue
        holding = tree.end(v, t) is not None
        if not holding:
            out.append(("hold", v, -1, t, tree.hold(v, t), path, i))
        if i > 0:
            child = prev.pop(path)
            if not tree.above(child, v, t):
                out += [("renew", child, v, f, t, -1, -1) for f in tree.renew(child, v, t)]
                out.append(("edge", child, v, t, tree.edge(child, v, t), -1, -1))
        if (i == 0 or not holding) and not is_last:
            prev[path] = v
        if is_last and done == done and not tree.rooted(v, done):   # Pastry delivered it here, at `done`
            out.append(("root", v, -1, done, tree.root(v, done), -1, -1))
    frame = pd.DataFrame(out, columns=columns[1:])
    return _first_roots(frame).assign(topic=topic)[columns]


def _first_roots(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with one root per holding, from the first delivery there: a SUBSCRIBE whose last hop came
    first may be delivered after another's (a node that sent it on to a dead node delivers it `rto_ms`
    later), and the rows come in the order of the hops."""
    roots = frame.kind == "root"
    first = frame[roots].groupby(["node", "t_to"], as_index=False).t_from.min()
    return pd.concat([frame[~roots], first.assign(kind="root", parent=-1, by=-1, hop=-1)[frame.columns]],
                     ignore_index=True)


class _Tree:
    """One topic's holdings and edges, growing as its SUBSCRIBEs settle."""

    def __init__(self, held: pd.DataFrame, spans: pd.DataFrame) -> None:
        self.holds: dict[int, list[tuple[float, float]]] = {}
        self.roots: dict[int, list[tuple[float, float]]] = {}
        self.parents: dict[int, list[tuple[int, float, float]]] = {}
        for v, p, a, b in zip(held.node.tolist(), held.parent.tolist(), held.t_from.tolist(),
                              held.t_to.tolist()):
            if p in (HELD, ROOTED):
                (self.holds if p == HELD else self.roots).setdefault(v, []).append((a, b))
            else:
                self.parents.setdefault(v, []).append((p, a, b))
        self.outages: dict[int, list[tuple[float, float]]] = {}
        for v, down, up in zip(spans.node.tolist(), spans.down.tolist(), spans.up.tolist()):
            self.outages.setdefault(v, []).append((down, up))

    def down(self, v: int, t: float) -> bool:
        """Whether v is down at t."""
        return any(down <= t < up for down, up in self.outages.get(v, ()))

    def end(self, v: int, t: float) -> float | None:
        """When v's holding in force at t ends (None: v does not hold the topic at t)."""
        return next((b for a, b in self.holds.get(v, ()) if a <= t < b), None)

    def rooted(self, v: int, t: float) -> bool:
        """Whether v is a root at t."""
        return any(a <= t < b for a, b in self.roots.get(v, ()))

    def root(self, v: int, t: float) -> float:
        """v (holding the topic) is a root from t for as long as it holds it; when that ends."""
        end = self.end(v, t)
        self.roots.setdefault(v, []).append((t, end))
        return end

    def hold(self, v: int, t: float) -> float:
        """v holds the topic from t until it next goes down; when that is."""
        end = min((down for down, _up in self.outages.get(v, ()) if down > t), default=math.inf)
        self.holds.setdefault(v, []).append((t, end))
        return end

    def renew(self, child: int, parent: int, t: float) -> list[float]:
        """End at t the edges parent -> child in force then; their start times."""
        edges = self.parents.get(child, [])
        again = [k for k, (p, f, b) in enumerate(edges) if p == parent and f <= t < b]
        for k in again:
            edges[k] = (parent, edges[k][1], t)
        return [edges[k][1] for k in again]

    def edge(self, child: int, parent: int, t: float) -> float:
        """parent takes child at t, for as long as it holds the topic; when that ends."""
        end = self.end(parent, t)
        self.parents.setdefault(child, []).append((parent, t, end))
        return end

    def above(self, a: int, v: int, t: float) -> bool:
        """Whether a is v's ancestor at t: reached from v up the edges in force then."""
        seen, todo = {v}, [v]
        while todo:
            for p, f, b in self.parents.get(todo.pop(), ()):
                if f <= t < b and p not in seen:
                    if p == a:
                        return True
                    seen.add(p)
                    todo.append(p)
        return False


def deliver(overlay: Overlay, trees: TimedTrees, at_root: DataFrame, hop_ms: float, until_ms: float,
            forward: Forward | None = None) -> DataFrame:
    """Every copy of the events that reached a node holding its topic: (event, topic, node, t).

    `at_root` has (event, topic, node, t): each event where and when Pastry delivered it; it starts down the
    tree where that node is a root then. A node u holding a copy at t sends one to each child it has then,
    which arrives at t + link(u, c) + hop_ms and is kept if the child holds the topic then and it is
    before `until_ms` (a message arriving at the very time its node goes down finds it down, as in
    `pastry.timed`). With `forward` (the application's forward upcall, a condition on event, topic, node
    and t), a node sends on only the copies for which it holds; it still delivers them to itself.
    """
    holds = trees.holds.select(TOPIC, NODE, F.col(FROM).alias("_h_from"), F.col(TO).alias("_h_to"))
    roots = trees.roots.select(TOPIC, NODE, F.col(FROM).alias("_r_from"), F.col(TO).alias("_r_to"))
    t = F.col(T_AT)
    starts = _kept(at_root.join(roots, [TOPIC, NODE]).filter(_during(t, "_r_from", "_r_to"))
                   .select(EVENT, TOPIC, NODE, T_AT), holds, until_ms)

    def send(at_parent: DataFrame) -> DataFrame:
        """Each node a copy reached sends one to each child it has then, kept where the child holds the
        topic."""
        now = at_parent.filter(_during(t, FROM, TO))
        sent = forwarded(now, forward).select(EVENT, TOPIC, F.col(SRC).alias(NODE),
                                              (t + F.col("edge_delay") + F.lit(float(hop_ms))).alias(T_AT))
        return _kept(sent, holds, until_ms)

    # the delay from parent to child, in that order (the sender's link to the receiver)
    edges = with_distance(overlay, trees.edges.select(TOPIC, SRC, DST, FROM, TO), DST, SRC, "edge_delay")
    sc = overlay.state.sparkSession.sparkContext
    reached = multicast("timed events", starts, edges, state_partitions(sc, overlay.ring.n), send)
    return reached.select(EVENT, TOPIC, NODE, T_AT)


def _during(t: Column, start: str, end: str) -> Column:
    """Whether time t falls in the interval [start, end) of a row (a holding's, an edge's, a root's)."""
    return (F.col(start) <= t) & (t < F.col(end))


def forwarded(copies: DataFrame, forward: Forward | None) -> DataFrame:
    """The copies (event, topic, node, t, ...) their nodes send on: all, or those the forward upcall lets
    through."""
    return copies if forward is None else copies.filter(forward)


def _kept(copies: DataFrame, holds: DataFrame, until_ms: float) -> DataFrame:
    """The copies that arrive while their node holds their topic, before the end."""
    t = F.col(T_AT)
    kept = _during(t, "_h_from", "_h_to") & (t < F.lit(float(until_ms)))
    return copies.join(holds, [TOPIC, NODE]).filter(kept).drop("_h_from", "_h_to")


def _by_edge(trees: TimedTrees, hb: Heartbeats) -> DataFrame:
    """The edges as (topic, c, p, t_from, t_to, t_heard) with `end`: when the parent stops sending, or the
    run ends."""
    return trees.edges.select(TOPIC, F.col(SRC).alias("c"), F.col(DST).alias("p"), FROM, TO, HEARD,
                              F.least(F.col(TO), F.lit(float(hb.until))).alias("end"))


def heartbeats(trees: TimedTrees, copies: DataFrame, hb: Heartbeats,
               forward: Forward | None = None) -> np.ndarray:
    """The heartbeats sent in each bin: each edge's parent's ticks while it has the child, less the ticks
    each child was sent an event's copy for (since the tick before). `copies` are `deliver`'s, with the
    same forward upcall."""
    copies = forwarded(copies, forward)
    spans = _by_edge(trees, hb).groupBy("p", FROM, "end").agg(F.count("*").alias("children"))

    def ticks(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for f in frames:
            p = f.p.to_numpy(np.int64)
            first = hb.first_tick(p, f[FROM].to_numpy(np.float64)).astype(np.int64)
            n = np.maximum(hb.first_tick(p, f.end.to_numpy(np.float64)).astype(np.int64) - first, 0)
            row = np.repeat(np.arange(len(p)), n)
            k = np.repeat(first, n) + np.arange(len(row)) - np.repeat(np.cumsum(n) - n, n)
            at = hb.bins.of(hb.tick(p[row], k))
            yield pd.DataFrame({"bin": at, "n": f.children.to_numpy(np.int64)[row]})
    sent = _bin_counts(spans.mapInPandas(ticks, "bin long, n long"), hb)
    spared = _sends(trees, copies, hb).filter(F.col("tick") < F.col("end"))
    spared = spared.select(TOPIC, "p", "c", FROM, "k", "bin").distinct()
    return sent - _bin_counts(spared.select(F.col("bin"), F.lit(1).cast("long").alias("n")), hb)


def _bin_counts(frame: DataFrame, hb: Heartbeats) -> np.ndarray:
    """Sum of `n` per `bin`, as an array over the run's bins."""
    got = frame.groupBy("bin").agg(F.sum("n").alias("n")).toPandas()
    out = np.zeros(hb.bins.n, np.int64)
    out[got["bin"].to_numpy(np.int64)] = got.n.to_numpy(np.int64)
    return out


def _sends(trees: TimedTrees, copies: DataFrame, hb: Heartbeats) -> DataFrame:
    """Each copy a parent sent a child: (topic, p, c, t_from, s), with the edge's end, the tick k it spares
    (the parent's first tick at or after s), that tick's time and bin, and `last`: the number of the
    parent's last tick on the edge."""
    s = F.col("s")
    sends = (copies.select(TOPIC, F.col(NODE).alias("p"), F.col(T_AT).alias("s"))
             .join(_by_edge(trees, hb), [TOPIC, "p"]).filter(_during(s, FROM, TO)))

    def spare(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for f in frames:
            p, end = f.p.to_numpy(np.int64), f.end.to_numpy(np.float64)
            k = hb.first_tick(p, f.s.to_numpy(np.float64))
            tick = hb.tick(p, k)
            yield pd.DataFrame({TOPIC: f[TOPIC], "p": p, "c": f.c, FROM: f[FROM], "s": f.s, "end": end,
                                "k": k.astype(np.int64), "tick": tick, "bin": hb.bins.of(tick),
                                "last": hb.first_tick(p, end).astype(np.int64) - 1})
    schema = (f"{TOPIC} long, p long, c long, {FROM} double, s double, end double, k long, tick double, "
              "bin long, last long")
    return sends.mapInPandas(spare, schema)


def timeouts(overlay: Overlay, trees: TimedTrees, copies: DataFrame, hb: Heartbeats,
             forward: Forward | None = None) -> pd.DataFrame:
    """Each child that declared its parent dead, and when: (topic, parent, child, t, t_gone: when the parent
    stopped holding the topic).

    A child hears from a parent that still has it at least every 2 T_hb (a copy spares at most the next
    tick), so only an edge whose parent stopped holding the topic within the run is declared: its child
    last heard it at the arrival of the last it sent on the edge (its last tick's heartbeat there, unless
    a copy spared it, or its last copy; at the edge's first hearing if nothing), and declares it T_hbf
    later, if it still holds the topic then and the run has not ended. `copies` are `deliver`'s, with the
    same forward upcall."""
    copies = forwarded(copies, forward)
    sends = _sends(trees, copies, hb).groupBy(TOPIC, "p", "c", FROM).agg(
        F.max("s").alias("s_max"), F.max((F.col("k") == F.col("last")).cast("int")).alias("spared"))
    child = trees.holds.select(TOPIC, F.col(NODE).alias("c"), F.col(FROM).alias("_c_from"),
                               F.col(TO).alias("_c_to"))
    edges = (_by_edge(trees, hb).filter(F.col(TO) < hb.until)
             .join(child, [TOPIC, "c"])
             .filter(_during(F.col(FROM), "_c_from", "_c_to"))
             .join(sends, [TOPIC, "p", "c", FROM], "left"))
    edges = with_distance(overlay, edges, "p", "c", "d")

    def declare(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for f in frames:
            p = f.p.to_numpy(np.int64)
            first = hb.first_tick(p, f[FROM].to_numpy(np.float64))
            last = hb.first_tick(p, f[TO].to_numpy(np.float64)) - 1
            beat = np.where((last >= first) & (f.spared.fillna(0).to_numpy() == 0), hb.tick(p, last), -np.inf)
            sent = np.maximum(beat, f.s_max.fillna(-np.inf).to_numpy(np.float64))
            heard = np.maximum(f[HEARD].to_numpy(np.float64), (sent + f.d.to_numpy(np.float64)) + hb.hop_ms)
            t = heard + hb.timeout_ms
            ok = t < np.minimum(f._c_to.to_numpy(np.float64), hb.until)
            yield pd.DataFrame({TOPIC: f[TOPIC][ok], "parent": p[ok], "child": f.c[ok], "t": t[ok],
                                "t_gone": f[TO][ok]})
    schema = f"{TOPIC} long, parent long, child long, t double, t_gone double"
    out = edges.mapInPandas(declare, schema).toPandas()
    return out.sort_values([TOPIC, "parent", "child", "t"], kind="stable").reset_index(drop=True)
