"""Experiment tno_ordering (SPEC T3): TNO over Scribe trees whose per-hop delays reorder events.

The ENS is the Scribe layer: a Pastry overlay on a transit-stub network, one tree per topic
built by the subscribe supersteps. An event travels publisher -> root (Pastry route) and down
the tree; every hop's physical delay is multiplied by an independent 1 + jitter * U(-1, 1), so
deliveries reorder. The same workload runs in four scenarios: the ordering layer on, off, with
subscription changes during the run, and with an unreliable ENS (loss, TTL, bounded buffer).

Two engines give the same tables: `process` runs publishers, sequencer, ENS and subscribers in
one discrete-event simulation; `spark` runs the sequencer there, then the dissemination as
supersteps down the trees, each subscriber's ordering layer (and its gap recovery) in a grouped
Arrow task, and the TNO check, in Spark.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from scribe_spark import bsp, report
from scribe_spark.arrow import local_frame
from scribe_spark.cli import Run
from scribe_spark.columns import TIME
from scribe_spark.config import TnoOrderingParams
from scribe_spark.laws import popularity
from scribe_spark.pastry import overlay as ov
from scribe_spark.reference.pairwise_order import pairwise_check
from scribe_spark.scribe import topics as tp
from scribe_spark.scribe import trees as tr
from scribe_spark.session import spark_session
from scribe_spark.tno import groups
from scribe_spark.tno import replay as rp
from scribe_spark.tno.check import CheckResult, check_tno, notifications_frame
from scribe_spark.tno.dissemination import disseminate, start_frame
from scribe_spark.tno.ordering import Subscriber
from scribe_spark.tno.scribe_ens import ScribeENS
from scribe_spark.tno.sequencer import Sequencer
from scribe_spark.tno.simulation import Recovery, Simulation, contiguous_placement
from scribe_spark.workloads.network import make_ring, shared_network
from scribe_spark.workloads.popularity import draw_subscriptions

_log = logging.getLogger(__name__)
SCENARIOS = ("tno", "no_ordering", "tno_subscription_changes", "tno_unreliable")
# below this many (subscriber pairs x mean log length) the pairwise comparison beats Spark's fixed
# cost (BENCHMARKS, "The TNO check as a Spark computation": 0.3 s against 15 s at 9,576 notifications)
PAIRWISE_UP_TO = 10_000_000


def pairwise_is_cheap(subscribers: int, notifications: int) -> bool:
    """Whether subscriber pairs x mean log length is small enough for the pairwise comparison."""
    return subscribers * (subscribers - 1) // 2 * notifications / max(subscribers, 1) <= PAIRWISE_UP_TO


def check(spark: SparkSession, subscribers: dict[int, Subscriber]) -> CheckResult:
    """TNO check of the subscribers' logs: pairwise where that is cheap, else in Spark (same counts)."""
    logs = {c: [e[0] for e in s.log] for c, s in subscribers.items()}
    undelivered = sum(len(s.waiting) for s in subscribers.values())
    if pairwise_is_cheap(len(logs), sum(len(x) for x in logs.values())):
        return pairwise_check(logs, undelivered)
    times = {c: [e[1] for e in s.log] for c, s in subscribers.items()}
    return check_tno(notifications_frame(spark, logs, times), len(logs), undelivered)


@dataclass
class Notified:
    """What the subscribers of one run were notified of, and how."""

    check: CheckResult
    notifications: int
    out_of_order_tags: int
    lost: int                   # ENS copies lost
    buffering: np.ndarray       # per notification, in subscriber then notification order (ms)
    recovery_messages: int = 0  # gap recovery's requests and replies
    recovered: int = 0          # events subscribers got by asking


@dataclass
class SparkENS:
    """The spark engine: dissemination supersteps, grouped ordering layers and the Spark TNO check."""

    tree: DataFrame             # topic, src, dst, edge_delay
    receivers: DataFrame        # topic, node, sub, since, late (a topic added by a subscription change)
    roots: dict
    ens: ScribeENS
    loss_key: int

    def deliveries(self, sim: Simulation, changes: bool) -> DataFrame:
        """Return (sub, eid, topic, at): every copy of what the sequencer released that the ENS carries."""
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
        out = (reached.join(receivers, [tr.TOPIC, tr.NODE]).join(F.broadcast(released), "eid")
               .where(F.col("since") <= F.col("t"))
               .select("sub", "eid", tr.TOPIC, (F.col("t") + F.col("delay")).alias(TIME))).localCheckpoint()
        bsp.release(reached)
        _log.info(f"{bsp.rows(out)} deliveries over the Scribe trees ({time.time() - t0:.1f}s)")
        return out

    def notify(self, sim: Simulation, deliveries: DataFrame, fresh: dict[int, Subscriber], changes: dict,
               ticks: list[float], loss: float, clients: int, recovery: Recovery | None = None,
               rtt: dict | None = None) -> Notified:
        """Replay every subscriber over its deliveries (with `recovery`, recovering gaps: `rtt[sub][topic]`
        is the round trip to its Scribe parent) and check TNO, in Spark."""
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
        left = logs.where(F.col("pos") == rp.SUMMARY).agg(F.sum("event").alias("waiting"),
                                                           F.sum(TIME).alias("lost")).first()
        asked = logs.where(F.col("pos") == rp.RECOVERY).agg(F.sum("event").alias("messages"),
                                                             F.sum(TIME).alias("recovered")).first()
        notes = logs.where(F.col("pos") >= 0)
        _log.info(f"{clients} ordering layers replayed ({time.time() - t0:.1f}s)")
        t0 = time.time()
        times = notes.orderBy("sub", "pos").select("sub", "event", TIME, "arrived", "out_of_order").toArrow()
        at, arrived = times.column(TIME).to_numpy(), times.column("arrived").to_numpy()
        if pairwise_is_cheap(clients, len(at)):
            sub, event = times.column("sub").to_numpy(), times.column("event").to_numpy()
            ordered = {c: [] for c in range(clients)}
            for c, e in zip(sub.tolist(), event.tolist()):
                ordered[c].append(e)
            res = pairwise_check(ordered, int(left["waiting"] or 0))
        else:
            rows = notes.select("sub", "event", F.col("pos").cast("int").alias("pos"), TIME)
            res = check_tno(rows, clients, int(left["waiting"] or 0))
        _log.info(f"{len(at)} notifications checked ({time.time() - t0:.1f}s)")
        out = Notified(res, len(at), int(np.sum(times.column("out_of_order").to_numpy(zero_copy_only=False))),
                       int(left["lost"] or 0), at - arrived, int(asked["messages"] or 0),
                       int(asked["recovered"] or 0))
        bsp.release(logs)
        events.destroy()
        if slots is not None:
            slots.destroy()
        return out


def run(p: TnoOrderingParams, run: Run) -> None:
    """Build the Scribe ENS, then run the four scenarios and check TNO over all logs."""
    spark = spark_session(run.name)
    rng = np.random.default_rng([p.seed, 7])
    routers, _ = shared_network(p, p.seed)
    ring = make_ring(p.nodes, p, np.random.default_rng([p.seed, p.nodes]), routers)
    ens_key, loss_key = (int(k) for k in np.random.default_rng([p.seed, 11]).integers(2**62, size=2))
    overlay = ov.build_overlay(spark, ring, "proximity", seed=p.seed)
    client_nodes = np.sort(rng.choice(p.nodes, p.clients, replace=False))
    probs = popularity(p.topics, p.popularity)
    sub_c, sub_t = draw_subscriptions(p.clients, p.topics_per_client, probs, rng)
    subs = {c: set() for c in range(p.clients)}
    for c, t in zip(sub_c, sub_t):
        subs[int(c)].add(int(t))
    changers = rng.choice(p.clients, p.subscription_changes, replace=False)
    later = {int(c): set(rng.choice(p.topics, 2, replace=False,
                                    p=probs).tolist()) - subs[int(c)] for c in changers}
    later = {c: t for c, t in later.items() if t}
    everyone = {c: subs[c] | later.get(c, set()) for c in subs}
    topics = tp.create([f"topic-{r}" for r in range(1, p.topics + 1)], ["tno"] * p.topics, secret=p.seed)

    # the ENS: Scribe trees for every subscription that exists at any time during the run
    t0 = time.time()
    pairs = [(t, int(client_nodes[c])) for c, ts in everyone.items() for t in ts]
    trees = tr.subscribe(overlay, topics,
                         tr.subscriptions_frame(spark, [a for a, _ in pairs], [b for _, b in pairs]))
    # row order drives the jitter draws
    edges = trees.edges.toPandas().sort_values(["topic", "src"]).reset_index(drop=True)
    roots = dict(zip(*trees.roots.toPandas()[["topic", "node"]].T.values))
    # the Pastry route from each publisher to the root, for every (client, topic) that publishes
    span = 1000.0 * p.events / p.rate
    pub_rng = np.random.default_rng([p.seed, 8])
    publications = sorted(zip(pub_rng.uniform(0, span, p.events), pub_rng.integers(0, p.clients, p.events),
                              pub_rng.choice(p.topics, p.events, p=probs)))
    change_at = {c: float(pub_rng.uniform(0.2 * span, 0.8 * span)) for c in later}
    pairs = sorted({(int(c), int(t)) for _, c, t in publications} | {(c, t) for c in later for t in later[c]})
    pub_c, pub_t = (np.array(x, dtype=np.int64) for x in zip(*pairs))
    with bsp.quiet():
        routed = ov.route(overlay, ov.messages_frame(spark, client_nodes[pub_c], topics.hi[pub_t],
                                                     topics.lo[pub_t]))
        routed = routed.toPandas().sort_values("mid")
    pub_to_root = dict(zip(pairs, routed.distance.to_numpy().tolist()))
    edge_delay = ring.prox.dist(edges.src.to_numpy(), edges.dst.to_numpy())
    ens = ScribeENS(edges, edge_delay, roots, pub_to_root, client_nodes, p.jitter, ens_key)
    run.log(f"Scribe ENS ready: {len(edges)} tree edges over {p.topics} topics ({time.time() - t0:.1f}s)")
    overlay.unpersist()

    sg = groups.local_groups(everyone, causal=p.causal)
    for t in range(p.topics):
        sg.setdefault(t, {t})
    rank = {t: t for t in range(p.topics)}   # precedence: topic rank (= popularity order)
    on_spark = None
    if p.engine == "spark":
        tree = local_frame(spark, edges[[tr.TOPIC, "src", "dst"]].assign(edge_delay=edge_delay))
        receivers = local_frame(spark, pd.DataFrame(
            [(t, int(client_nodes[c]), c, 0.0 if t in subs[c] else change_at[c], t not in subs[c])
             for c in everyone for t in sorted(everyone[c])],
            columns=[tr.TOPIC, tr.NODE, "sub", "since", "late"]))
        on_spark = SparkENS(tree.localCheckpoint(), receivers.localCheckpoint(), roots, ens, loss_key)
        # each subscriber's round trip to its Scribe parent, per topic it ever subscribes to (gap recovery)
        rtt = {c: {t: ens.rtt(t, c) for t in everyone[c]} for c in everyone}

    rows, delays, sequenced = [], {}, {}
    # every scenario with the first chain rule; the other rules on the reliable ENS (`tno`)
    runs = [(p.chains[0], x, p.loss if x == "tno_unreliable" else 0.0, None) for x in SCENARIOS]
    runs += [(c, "tno", 0.0, None) for c in p.chains[1:]]
    # loss with and without recovery (first chain rule): ENS and sequencer messages lost alike
    runs += [(p.chains[0], "loss_sweep", x, recover) for x in p.loss_sweep for recover in (False, True)]
    for chains, scenario, loss, recover in runs:
        t0 = time.time()
        sim_rng = np.random.default_rng([p.seed, 9])
        unreliable = scenario in ("tno_unreliable", "loss_sweep")
        recovery = None if recover is None else Recovery(
            ens.rtt, np.random.default_rng([p.seed, 10]), after_ms=p.recovery_after_ms,
            timeout_ms=p.recovery_timeout_ms, sequencer_loss=loss, enabled=recover)
        seq = Sequencer(sg, rank, chains=chains, together=later.values())
        place = contiguous_placement(list(range(p.topics)), p.servers, list(range(p.clients)), p.regions,
                                     sim_rng)
        def fresh() -> dict[int, Subscriber]:
            return {c: Subscriber(c, set(subs[c]), ordered=scenario != "no_ordering",
                                  ttl=p.ttl_ms if unreliable else None,
                                  buffer_size=p.buffer_size if unreliable else None) for c in subs}
        subscribers = fresh()
        sim = Simulation(seq, place, subscribers, ens if on_spark is None else None, sim_rng, loss=loss,
                         recovery=recovery, loss_key=loss_key)
        for at, c, t in publications:
            sim.at(float(at), sim.publish, int(c), int(t))
        if scenario == "tno_subscription_changes":
            for c, ts in later.items():
                sim.at(change_at[c], sim.subscribe, c, ts)
        ticks = rp.tick_times(p.ttl_ms / 5, span + 20 * p.ttl_ms) if unreliable else []
        if on_spark is None:
            for at in ticks[:1]:
                sim.at(at, sim.tick, p.ttl_ms / 5, span + 20 * p.ttl_ms)
            sim.run()
            out = Notified(check(spark, subscribers), int(sum(len(s.log) for s in subscribers.values())),
                           int(sum(e[2] for s in subscribers.values() for e in s.log)), sim.stats.lost,
                           np.array([e[1] - e[3] for s in subscribers.values() for e in s.log]),
                           sim.stats.recovery_messages, sim.stats.recovered)
        else:
            # the sequencer only (no ENS in the simulation), and what the ENS carries: the same for
            # every scenario with the same chain rule, subscription changes and sequencer losses (ENS
            # losses come later)
            changing = scenario == "tno_subscription_changes"
            seq_loss = recovery.sequencer_loss if recovery is not None else 0.0
            if (chains, changing, seq_loss) not in sequenced:
                sim.run()
                sequenced[(chains, changing, seq_loss)] = (sim, on_spark.deliveries(sim, changing))
            sim, carried = sequenced[(chains, changing, seq_loss)]
            moves = {c: (change_at[c], later[c]) for c in later} if changing else {}
            out = on_spark.notify(sim, carried, fresh(), moves, ticks, loss, p.clients, recovery, rtt)
        res, buffering = out.check, out.buffering
        if scenario != "loss_sweep":
            delays[(chains, scenario)] = buffering
        rows.append({"chains": chains, "scenario": scenario, "loss": loss, "recovery": bool(recover),
                     "subscribers": p.clients, "events": p.events,
                     "notifications": out.notifications,
                     "subscriber_pairs": res.subscriber_pairs, "violating_pairs": res.violating_pairs,
                     "inverted_event_pairs": res.inverted_event_pairs, "undelivered": res.undelivered,
                     "out_of_order_tags": out.out_of_order_tags,
                     "lost": out.lost,
                     "mean_buffering_ms": float(buffering.mean()) if len(buffering) else 0.0,
                     "p99_buffering_ms": float(np.percentile(buffering, 99)) if len(buffering) else 0.0,
                     "mean_timestamp_latency_ms": float(np.mean(sim.stats.latency)),
                     "recovery_messages": out.recovery_messages, "recovered": out.recovered,
                     "sequencer_resends": sim.stats.resent})
        what = (scenario if scenario != "loss_sweep"
                else f"loss {loss:.1%} {'with' if recover else 'without'} recovery")
        run.log(f"{chains} chains, {what}: {res.violating_pairs} violating subscriber pairs of "
                f"{res.subscriber_pairs}, "
                f"{res.undelivered} undelivered, {rows[-1]['out_of_order_tags']} out-of-order tags "
                f"({time.time() - t0:.1f}s)")
    for _, carried in sequenced.values():
        bsp.release(carried)
    table = pd.DataFrame(rows)
    report.write_csv(table, run.path("ordering.csv"))
    main, sweep = table[table.scenario != "loss_sweep"], table[table.scenario == "loss_sweep"]
    at = f"\n{p.clients:,} subscribers, {p.topics:,} topics, {p.events:,} events at {p.rate:g}/s"
    with report.figure(run.path("buffering_delay_cdf.png"), "Delay added by the ordering layer" + at,
                       "buffering delay (ms)", "cumulative fraction of notifications") as ax:
        for (chains, scenario), v in delays.items():
            if len(v) and scenario != "no_ordering":
                report.cdf(ax, v, label=f"{scenario}, {chains}")
    with report.figure(run.path("violations.png"),
                       "Subscriber pairs that saw common events in different orders" + at,
                       "scenario", "violating subscriber pairs") as ax:
        bars = ax.bar(range(len(main)), main.violating_pairs)
        ax.bar_label(bars, fontsize=8)   # a zero bar is otherwise not there at all
        ax.set_xticks(range(len(main)), main.scenario + ", " + main.chains, rotation=30, ha="right")
    if len(sweep):
        with report.figure(run.path("loss_recovery.png"),
                           f"ENS and sequencer loss ({p.chains[0]} chains)" + at,
                           "loss probability", "count") as ax:
            for recover, t in sweep.groupby("recovery"):
                how = "with recovery" if recover else "without recovery"
                line = ax.plot(t.loss, t.out_of_order_tags, marker="o", label=f"out-of-order tags, {how}")[0]
                ax.plot(t.loss, t.violating_pairs, marker="x", linestyle="--", color=line.get_color(),
                        label=f"violating subscriber pairs, {how}")
            report.log_x(ax, sweep.loss)
    cols = ["loss", "recovery", "notifications", "violating_pairs", "undelivered", "out_of_order_tags",
            "lost", "recovery_messages", "recovered", "sequencer_resends", "mean_buffering_ms",
            "p99_buffering_ms", "mean_timestamp_latency_ms"]
    run.path("summary.md").write_text(
        f"# tno_ordering\n\n{p.clients} subscribers (of {p.nodes} Scribe nodes), {p.topics} topics "
        f"({p.popularity} popularity, {p.topics_per_client} topics each), {p.events} events at {p.rate:g}/s, "
        f"per-hop jitter ±{100 * p.jitter:g}%, {len(later)} subscription changes"
        + (f" (of the {p.subscription_changes} clients drawn to change, "
           f"{p.subscription_changes - len(later)} drew only topics they had)"
           if len(later) < p.subscription_changes else "")
        + f", loss {100 * p.loss:g}% in the "
        f"unreliable run (TTL {p.ttl_ms:g} ms, buffer {p.buffer_size}), {'causal' if p.causal else 'TNO'} "
        f"sequencing groups, seed {p.seed}. Chain rules: {', '.join(p.chains)} (etree: up the elimination "
        "tree; interval: every TM between in precedence order; literal: group members only, which can leave "
        "events buffered forever: `undelivered`). TNO is checked, not assumed: every pair of subscribers, "
        "every pair of events both were notified of.\n\n" + report.markdown_table(main, ".1f") + "\n\n"
        f"## Loss with and without recovery ({p.chains[0]} chains)\n\nENS deliveries and sequencer "
        "messages are lost with the given probability; a lost sequencer message is sent again after "
        f"{p.recovery_timeout_ms:g} ms (both arms). With recovery, a subscriber whose buffered events "
        f"wait on a missing slot {p.recovery_after_ms:g} ms after an arrival asks its Scribe parent for "
        "it (one tree hop there and back; requests and replies lost alike; asked again after "
        f"{p.recovery_timeout_ms:g} ms); TTL and buffer stay as the backstop. Same random ENS losses in "
        "both arms.\n\n"
        + report.markdown_table(sweep[cols].assign(loss=(100 * sweep.loss).map("{:g}%".format)), ".1f")
        + "\n")
