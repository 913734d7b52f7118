"""The Scribe ENS in Spark: dissemination as supersteps down the trees, and every subscriber's ordering
layer (with its gap recovery) replayed in a grouped Arrow task over what the ENS brought it.

The same deliveries and notifications as `simulation.Simulation` with `scribe_ens.ScribeENS`, which
runs the ENS in one process; the sequencer runs there in both cases.
"""
from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from scribe_spark import bsp
from scribe_spark.columns import NODE, TIME, TOPIC
from scribe_spark.spark.arrow import local_frame
from scribe_spark.tno import replay as rp
from scribe_spark.tno.dissemination import disseminate, start_frame
from scribe_spark.tno.ordering import Released, Subscriber
from scribe_spark.tno.scribe_ens import ScribeENS
from scribe_spark.tno.simulation import Recovery, Simulation

_log = logging.getLogger(__name__)


@dataclass
class Replayed:
    """The subscribers' replayed logs: their notifications (`pos` >= 0) and what the replay counted."""

    logs: DataFrame          # sub, pos, event, time, arrived, out_of_order (and the summary rows)
    waiting: int             # events still buffered at the end
    lost: int                # ENS copies lost
    recovery_messages: int   # gap recovery's requests and replies
    recovered: int           # events subscribers got by asking
    released: Released       # forced releases by cause, and the largest buffer
    held: list = field(default_factory=list)   # the broadcasts the replay read

    @property
    def notifications(self) -> DataFrame:
        """The notifications, in each subscriber's order by `pos`."""
        return self.logs.where(F.col("pos") >= 0)

    def release(self) -> None:
        """Free the logs and the broadcasts behind them (nothing may read them afterwards)."""
        bsp.release(self.logs)
        for b in self.held:
            b.destroy()


@dataclass
class SparkENS:
    """The spark engine of T3: what the ENS carries, and the subscribers' ordering layers over it."""

    tree: DataFrame             # topic, src, dst, edge_delay
    receivers: DataFrame        # topic, node, sub, since, late (a topic added by a subscription change)
    roots: dict
    ens: ScribeENS
    loss_key: int

    def deliveries(self, sim: Simulation, changes: bool) -> DataFrame:
        """Return (sub, eid, topic, time): every copy of what the sequencer released that the ENS carries."""
        spark, t0 = self.tree.sparkSession, time.time()
        # a topic nobody subscribes to has no tree: its events reach no one
        rel = [(t, c, topic, ev) for t, c, topics, ev in sim.released
               for topic in topics if topic in self.roots]
        eid = np.array([ev.eid for *_, ev in rel], dtype=np.int64)
        client = np.array([c for _, c, _, _ in rel], dtype=np.int64)
        topic = np.array([x for _, _, x, _ in rel], dtype=np.int64)
        root = np.array([self.roots[int(x)] for x in topic], dtype=np.int64)
        starts = start_frame(spark, eid, topic, root, self.ens.to_root(eid, client, topic))
        reached = disseminate(starts, self.tree, self.ens.jitter, self.ens.key,
                              int(spark.conf.get("spark.sql.shuffle.partitions")))
        released = local_frame(spark, pd.DataFrame({"eid": [ev.eid for *_, ev in sim.released],
                                                    "t": [t for t, *_ in sim.released]}))
        receivers = self.receivers if changes else self.receivers.where(~F.col("late"))
        out = (reached.join(receivers, [TOPIC, NODE]).join(F.broadcast(released), "eid")
               .where(F.col("since") <= F.col("t"))
               .select("sub", "eid", TOPIC, (F.col("t") + F.col("delay")).alias(TIME))).localCheckpoint()
        bsp.release(reached)
        _log.info(f"{bsp.rows(out)} deliveries over the Scribe trees ({time.time() - t0:.1f}s)")
        return out

    def replay(self, sim: Simulation, deliveries: DataFrame, fresh: dict[int, Subscriber], changes: dict,
               ticks: list[float], loss: float, recovery: Recovery | None = None,
               rtt: dict | None = None) -> Replayed:
        """Replay every subscriber over its deliveries (with `recovery`, recovering gaps: `rtt[sub][topic]`
        is the round trip to its Scribe parent); `release` the result when done with it."""
        spark = deliveries.sparkSession
        done = {c: (t, dict(ev.ts)) for t, c, _, ev in sim.released if ev.dummy}
        moves = {c: rp.Change(at, frozenset(ts), *done[c]) for c, (at, ts) in changes.items()}
        events = spark.sparkContext.broadcast({ev.eid: ev for *_, ev in sim.released})
        gaps = recovery.gaps(loss) if recovery is not None and recovery.enabled else None
        slots = None if gaps is None else spark.sparkContext.broadcast(
            {(u, ev.tsd()[u]): (t, ev.eid) for t, _, _, ev in sim.released for u in ev.own})
        t0 = time.time()
        logs = rp.replay_frame(deliveries, events, lambda c: fresh[c], moves, ticks, loss,
                               self.loss_key, gaps, slots, rtt).localCheckpoint()
        got = _summary(logs)
        _log.info(f"{len(fresh)} ordering layers replayed ({time.time() - t0:.1f}s)")
        released = Released(got[rp.FORCED, "n"], got[rp.FORCED, "x"], got[rp.PEAK, "most"])
        return Replayed(logs, got[rp.SUMMARY, "n"], got[rp.SUMMARY, "x"], got[rp.RECOVERY, "n"],
                        got[rp.RECOVERY, "x"], released, [b for b in (events, slots) if b is not None])


def _summary(logs: DataFrame) -> defaultdict:
    """The subscribers' summary rows (pos < 0) in one pass: (pos, "n" | "x") -> the sum of event |
    time, (pos, "most") -> the largest event; 0 for a kind no subscriber wrote."""
    got: defaultdict = defaultdict(int)
    for r in logs.where(F.col("pos") < 0).groupBy("pos").agg(
            F.sum("event").alias("n"), F.sum(TIME).alias("x"), F.max("event").alias("most")).collect():
        for key in ("n", "x", "most"):
            got[r["pos"], key] = int(r[key] or 0)
    return got
