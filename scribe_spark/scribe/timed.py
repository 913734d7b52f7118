"""Scribe in simulated time on the trees of the start: events down the trees, heartbeats, their timeouts.

The trees are those Scribe builds on the overlay at the start (`trees.subscribe`); an event reaches its
topic's root by Pastry in time (`pastry.timed`, routed as a lookup of the topicId). A node holds its
Scribe state from the start until it first goes down: one that went down (even if it came back since)
is in no tree any more, so an event reaching it is dropped with the copies it would have sent on.

A parent sends each child a heartbeat at each of its ticks (phase + k T_hb) unless it sent it an event's
copy since the tick before; a child that hears nothing from its parent (heartbeat or copy) for T_hbf
declares it dead (the fault upcall). The trees are not repaired yet (no re-SUBSCRIBE): what a run
measures is how events fare on the trees of the start while the overlay under them changes, what the
heartbeats cost, and how long the children of a node that went take to notice. Heartbeats and timeouts
are computed in closed form from each parent's ticks and the copies it sent, not sent one by one; the
sequential reference (`reference/timed_events`) sends them one by one, and the two must agree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from scribe_spark.columns import NODE, TOPIC
from scribe_spark.pastry.overlay import DST, SRC, Overlay, state_partitions, with_distance
from scribe_spark.pastry.timed import Bins, first_ticks, guess_ticks, keepalive_phase
from scribe_spark.scribe.trees import Trees, multicast

EVENT, T_AT, GONE = "event", "t", "t_gone"
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
        """Per node, the number of its first tick at or after t (ticks computed as phase + k period)."""
        phase, t = self.phase(nodes), np.asarray(t, np.float64)
        fin = np.where(np.isfinite(t), t, self.until)
        return first_ticks(phase, self.period_ms, lambda s, i: s >= fin[i], guess_ticks(fin, phase,
                                                                                          self.period_ms))

    def tick(self, nodes: np.ndarray, k: np.ndarray) -> np.ndarray:
        """The time of each node's k-th tick."""
        return self.phase(nodes) + k * self.period_ms


def deliver(overlay: Overlay, trees: Trees, at_root: DataFrame, gone: DataFrame, hop_ms: float,
            until_ms: float, forward: Forward | None = None) -> DataFrame:
    """Every copy of the events that reached a node still in its tree: (event, topic, node, t).

    `at_root` has (event, topic, node, t): each event where and when Pastry delivered it, kept only at its
    topic's root; `gone` has (node, t_gone): when each node that went down first did. A node u holding a
    copy at t sends one to each child c, which arrives at t + link(u, c) + hop_ms and is kept if that is
    before c first went down and before `until_ms` (a message arriving at the very time its node goes
    down finds it down, as in `pastry.timed`). With `forward` (the application's forward upcall, a condition
    on event, topic, node and t), a node sends on only the copies for which it holds; it still delivers
    them to itself.
    """
    gone = F.broadcast(gone.select(NODE, GONE))
    roots = at_root.join(trees.roots.select(TOPIC, NODE), [TOPIC, NODE], "left_semi")
    starts = _kept(roots.select(EVENT, TOPIC, NODE, T_AT), gone, until_ms)

    def send(at_parent: DataFrame) -> DataFrame:
        """Each node a copy reached sends one to each child, kept where the child still holds the tree."""
        sent = forwarded(at_parent, forward).select(EVENT, TOPIC, F.col(SRC).alias(NODE),
                                (F.col(T_AT) + F.col("edge_delay") + F.lit(float(hop_ms))).alias(T_AT))
        return _kept(sent, gone, until_ms)

    # the delay from parent to child, in that order (the sender's link to the receiver)
    edges = with_distance(overlay, trees.edges.select(TOPIC, SRC, DST), DST, SRC, "edge_delay")
    sc = overlay.state.sparkSession.sparkContext
    reached = multicast("timed events", starts, edges, state_partitions(sc, overlay.ring.n), send)
    return reached.select(EVENT, TOPIC, NODE, T_AT)


def forwarded(copies: DataFrame, forward: Forward | None) -> DataFrame:
    """The copies (event, topic, node, t, ...) their nodes send on: all, or those the forward upcall lets
    through."""
    return copies if forward is None else copies.filter(forward)


def _kept(copies: DataFrame, gone: DataFrame, until_ms: float) -> DataFrame:
    """The copies that arrive before their node first went down and before the end."""
    t, left = F.col(T_AT), F.col(GONE)
    kept = (left.isNull() | (t < left)) & (t < F.lit(float(until_ms)))
    return copies.join(gone, NODE, "left").filter(kept).drop(GONE)


def _ends(gone: DataFrame, col: str) -> DataFrame:
    """`gone` keyed by `col`: when the node in `col` first went down, as `_<col>_gone` (null: it did not)."""
    return F.broadcast(gone.select(F.col(NODE).alias(col), F.col(GONE).alias(f"_{col}_gone")))


def heartbeats(trees: Trees, copies: DataFrame, gone: DataFrame, hb: Heartbeats,
               forward: Forward | None = None) -> np.ndarray:
    """The heartbeats sent in each bin: each parent's ticks before it stops, one per child, less the ticks
    each child was sent an event's copy for (since the tick before). `copies` are `deliver`'s, with the
    same forward upcall."""
    copies = forwarded(copies, forward)
    parents = trees.edges.groupBy(F.col(DST).alias("p")).agg(F.count("*").alias("children"))
    parents = parents.join(_ends(gone, "p"), "p", "left")

    def ticks(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for f in frames:
            p = f.p.to_numpy(np.int64)
            end = np.minimum(f._p_gone.fillna(np.inf).to_numpy(np.float64), hb.until)
            n = hb.first_tick(p, end).astype(np.int64)   # ticks 0 .. n - 1 happen
            row = np.repeat(np.arange(len(p)), n)
            k = np.arange(len(row)) - np.repeat(np.cumsum(n) - n, n)
            at = hb.bins.of(hb.tick(p[row], k))
            yield pd.DataFrame({"bin": at, "n": f.children.to_numpy(np.int64)[row]})
    sent = _bin_counts(parents.mapInPandas(ticks, "bin long, n long"), hb)
    spared = _sends(trees, copies, gone, hb).filter(F.col("tick") < F.col("end"))
    spared = spared.select(TOPIC, "p", "c", "k", "bin").distinct()
    return sent - _bin_counts(spared.select(F.col("bin"), F.lit(1).cast("long").alias("n")), hb)


def _bin_counts(frame: DataFrame, hb: Heartbeats) -> np.ndarray:
    """Sum of `n` per `bin`, as an array over the run's bins."""
    got = frame.groupBy("bin").agg(F.sum("n").alias("n")).toPandas()
    out = np.zeros(hb.bins.n, np.int64)
    out[got["bin"].to_numpy(np.int64)] = got.n.to_numpy(np.int64)
    return out


def _sends(trees: Trees, copies: DataFrame, gone: DataFrame, hb: Heartbeats) -> DataFrame:
    """Each copy a parent sent a child: (topic, p, c, s), with the parent's end, the tick k it spares (its
    first tick at or after s), that tick's time and bin, and `last`: the number of the parent's last tick."""
    edges = trees.edges.select(TOPIC, F.col(SRC).alias("c"), F.col(DST).alias("p"))
    sends = (copies.select(TOPIC, F.col(NODE).alias("p"), F.col(T_AT).alias("s")).join(edges, [TOPIC, "p"])
             .join(_ends(gone, "p"), "p", "left"))

    def spare(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for f in frames:
            p = f.p.to_numpy(np.int64)
            end = np.minimum(f._p_gone.fillna(np.inf).to_numpy(np.float64), hb.until)
            k = hb.first_tick(p, f.s.to_numpy(np.float64))
            tick = hb.tick(p, k)
            yield pd.DataFrame({TOPIC: f[TOPIC], "p": p, "c": f.c, "s": f.s, "end": end,
                                "k": k.astype(np.int64), "tick": tick, "bin": hb.bins.of(tick),
                                "last": hb.first_tick(p, end).astype(np.int64) - 1})
    schema = f"{TOPIC} long, p long, c long, s double, end double, k long, tick double, bin long, last long"
    return sends.mapInPandas(spare, schema)


def timeouts(overlay: Overlay, trees: Trees, copies: DataFrame, gone: DataFrame,
             hb: Heartbeats, forward: Forward | None = None) -> pd.DataFrame:
    """Each child that declared its parent dead, and when: (topic, parent, child, t).

    A live parent's child hears from it at least every 2 T_hb (a copy spares at most the next tick), so
    only a parent that stopped is declared: its child last heard it at the arrival of the last it sent (its
    last tick's heartbeat, unless a copy spared it, or its last copy; at the start if nothing), and declares
    it T_hbf later, if it still holds the tree then and the run has not ended. `copies` are `deliver`'s, with
    the same forward upcall."""
    copies = forwarded(copies, forward)
    sends = _sends(trees, copies, gone, hb).groupBy(TOPIC, "p", "c").agg(
        F.max("s").alias("s_max"), F.max((F.col("k") == F.col("last")).cast("int")).alias("spared"))
    edges = (trees.edges.select(TOPIC, F.col(SRC).alias("c"), F.col(DST).alias("p"))
             .join(_ends(gone, "p"), "p", "left").filter(F.col("_p_gone") < hb.until)
             .join(_ends(gone, "c"), "c", "left").join(sends, [TOPIC, "p", "c"], "left"))
    edges = with_distance(overlay, edges, "p", "c", "d")

    def declare(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for f in frames:
            p = f.p.to_numpy(np.int64)
            last = hb.first_tick(p, f._p_gone.to_numpy(np.float64)) - 1
            beat = np.where((last >= 0) & (f.spared.fillna(0).to_numpy() == 0), hb.tick(p, last), -np.inf)
            sent = np.maximum(beat, f.s_max.fillna(-np.inf).to_numpy(np.float64))
            heard = np.where(sent > -np.inf, (sent + f.d.to_numpy(np.float64)) + hb.hop_ms, 0.0)
            t = heard + hb.timeout_ms
            ok = t < np.minimum(f._c_gone.fillna(np.inf).to_numpy(np.float64), hb.until)
            yield pd.DataFrame({TOPIC: f[TOPIC][ok], "parent": p[ok], "child": f.c[ok], "t": t[ok]})
    out = edges.mapInPandas(declare, f"{TOPIC} long, parent long, child long, t double").toPandas()
    return out.sort_values([TOPIC, "parent", "child"], kind="stable").reset_index(drop=True)
