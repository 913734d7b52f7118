"""Experiment tno_ordering (T3): TNO over Scribe trees whose per-hop delays reorder events.

The ENS is the Scribe layer: a Pastry overlay on a transit-stub network, one tree per topic
built by the subscribe supersteps. An event travels publisher -> root (Pastry route) and down
the tree; every hop's physical delay is multiplied by an independent 1 + jitter * U(-1, 1), so
deliveries reorder. The same workload runs in four scenarios: the ordering layer on, off, with
subscription changes during the run, and with an unreliable ENS (loss, TTL, bounded buffer).

Two engines give the same tables: `process` runs publishers, sequencer, ENS and subscribers in
one discrete-event simulation; `spark` runs the sequencer there, then the ENS and the subscribers'
ordering layers in Spark (`tno.spark_ens`), and the TNO check too where it is large.
"""
from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from scribe_spark import bsp
from scribe_spark import report as plots
from scribe_spark.columns import TIME
from scribe_spark.config import TnoOrderingParams
from scribe_spark.experiments.outputs import Outcome
from scribe_spark.experiments.run import Run
from scribe_spark.laws import popularity
from scribe_spark.pastry import overlay as ov
from scribe_spark.reference.causal_order import causal_violations
from scribe_spark.reference.pairwise_order import pairwise_check
from scribe_spark.scribe import topics as tp
from scribe_spark.scribe import trees as tr
from scribe_spark.spark.arrow import local_frame
from scribe_spark.spark.session import spark_session
from scribe_spark.streams import Purpose, stream
from scribe_spark.tno import groups
from scribe_spark.tno import replay as rp
from scribe_spark.tno.check import CheckResult, check_tno, notifications_frame
from scribe_spark.tno.live_groups import LiveGroups
from scribe_spark.tno.ordering import Released, Subscriber
from scribe_spark.tno.scribe_ens import ScribeENS
from scribe_spark.tno.sequencer import Sequencer, precedence_rank
from scribe_spark.tno.simulation import Recovery, Simulation, contiguous_placement
from scribe_spark.tno.spark_ens import SparkENS
from scribe_spark.workloads.network import make_ring, shared_network
from scribe_spark.workloads.popularity import draw_subscriptions

_log = logging.getLogger(__name__)
SCENARIOS = ("tno", "no_ordering", "tno_subscription_changes", "tno_dynamic_groups", "tno_unreliable")
CHANGING = ("tno_subscription_changes", "tno_dynamic_groups")   # the scenarios whose subscriptions change
# below this many (subscriber pairs x mean log length) the pairwise comparison beats Spark's fixed
# cost (the performance page, "TNO")
PAIRWISE_UP_TO = 10_000_000
# above this many notifications the causal count is not made (its per-event lists on the driver would
# cost more than the run; ordering.csv then leaves causal_violations empty)
CAUSAL_UP_TO = 5_000_000


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
    causal_violations: int | None = None   # notifications out of causal order (None: too many to count)
    released: Released = field(default_factory=Released)   # forced releases by cause, largest buffer


@dataclass
class Workload:
    """T3's workload: which nodes are clients, who subscribes to what now and later, and when."""

    probs: np.ndarray                 # each topic's probability (subscriptions and publications)
    client_nodes: np.ndarray          # the overlay node of each client
    subs: dict[int, set[int]]         # client -> the topics it subscribes to from the start
    later: dict[int, set[int]]        # client -> the topics a subscription change adds
    everyone: dict[int, set[int]]     # client -> every topic it ever subscribes to
    publications: list[tuple]         # (time ms, client, topic), sorted
    change_at: dict[int, float]       # client -> when its subscription changes (ms)
    span: float                       # the publications' time span (ms)


def _workload(p: TnoOrderingParams) -> Workload:
    """Draw the clients, their subscriptions and changes, and the publications."""
    rng = stream(p.seed, Purpose.WORKLOAD)
    client_nodes = np.sort(rng.choice(p.nodes, p.clients, replace=False))
    probs = popularity(p.topics, p.popularity)
    sub_c, sub_t = draw_subscriptions(p.clients, p.topics_per_client, probs, rng)
    subs = {c: set() for c in range(p.clients)}
    for c, t in zip(sub_c, sub_t):
        subs[int(c)].add(int(t))
    changers = rng.choice(p.clients, p.subscription_changes, replace=False)
    later = {int(c): set(rng.choice(p.topics, 2, replace=False, p=probs).tolist()) - subs[int(c)]
             for c in changers}
    later = {c: t for c, t in later.items() if t}
    everyone = {c: subs[c] | later.get(c, set()) for c in subs}
    span = 1000.0 * p.events / p.rate
    pub_rng = stream(p.seed, Purpose.PUBLICATIONS)
    publications = sorted(zip(pub_rng.uniform(0, span, p.events), pub_rng.integers(0, p.clients, p.events),
                              pub_rng.choice(p.topics, p.events, p=probs)))
    change_at = {c: float(pub_rng.uniform(0.2 * span, 0.8 * span)) for c in later}
    return Workload(probs, client_nodes, subs, later, everyone, publications, change_at, span)


def _scribe_ens(spark, p: TnoOrderingParams, run: Run, w: Workload, ens_key: int) -> tuple:
    """Build the overlay and the Scribe trees of every subscription that ever exists; return the ENS."""
    routers, _ = shared_network(p, p.seed)
    ring = make_ring(p.nodes, p, p.seed, routers, spark=spark)
    overlay = ov.build_overlay(spark, ring, "proximity", seed=p.seed)
    topics = tp.create([f"topic-{r}" for r in range(1, p.topics + 1)], ["tno"] * p.topics, secret=p.seed)
    t0 = time.time()
    pairs = [(t, int(w.client_nodes[c])) for c, ts in w.everyone.items() for t in ts]
    trees = tr.subscribe(overlay, topics,
                         tr.subscriptions_frame(spark, [a for a, _ in pairs], [b for _, b in pairs]))
    # row order drives the jitter draws
    edges = trees.edges.toPandas().sort_values(["topic", "src"]).reset_index(drop=True)
    roots = dict(zip(*trees.roots.toPandas()[["topic", "node"]].T.values))
    # the Pastry route from each publisher to the root, for every (client, topic) that publishes
    pairs = sorted({(int(c), int(t)) for _, c, t in w.publications}
                   | {(c, t) for c in w.later for t in w.later[c]})
    pub_c, pub_t = (np.array(x, dtype=np.int64) for x in zip(*pairs))
    with bsp.quiet():
        routed = ov.route(overlay, ov.messages_frame(spark, w.client_nodes[pub_c], topics.hi[pub_t],
                                                     topics.lo[pub_t]))
        routed = routed.toPandas().sort_values("mid")
    pub_to_root = dict(zip(pairs, routed.distance.to_numpy().tolist()))
    edge_delay = ring.prox.dist(edges.src.to_numpy(), edges.dst.to_numpy())
    ens = ScribeENS(edges, edge_delay, roots, pub_to_root, w.client_nodes, p.jitter, ens_key)
    run.log(f"Scribe ENS ready: {len(edges)} tree edges over {p.topics} topics ({time.time() - t0:.1f}s)")
    overlay.unpersist()
    return ens, edges, edge_delay, roots


def _on_spark(spark, p: TnoOrderingParams, w: Workload, ens: ScribeENS, edges, edge_delay, roots,
              loss_key: int) -> SparkENS:
    """The spark engine's ENS: the trees and each client's receiving nodes as frames."""
    tree = local_frame(spark, edges[[tr.TOPIC, "src", "dst"]].assign(edge_delay=edge_delay))
    receivers = local_frame(spark, pd.DataFrame(
        [(t, int(w.client_nodes[c]), c, 0.0 if t in w.subs[c] else w.change_at[c], t not in w.subs[c])
         for c in w.everyone for t in sorted(w.everyone[c])],
        columns=[tr.TOPIC, tr.NODE, "sub", "since", "late"]))
    return SparkENS(tree.localCheckpoint(), receivers.localCheckpoint(), roots, ens, loss_key)


def simulate(p: TnoOrderingParams, run: Run) -> Outcome:
    """Build the Scribe ENS, then run the four scenarios, the other chain rules and the loss sweep."""
    spark = spark_session(run.name)
    w = _workload(p)
    ens_key, loss_key = (int(k) for k in stream(p.seed, Purpose.KEYS).integers(2**62, size=2))
    ens, edges, edge_delay, roots = _scribe_ens(spark, p, run, w, ens_key)
    sg = groups.local_groups(w.everyone, causal=p.causal)
    for t in range(p.topics):
        sg.setdefault(t, {t})
    rank = precedence_rank(p.topics, "topic_id")   # the paper's: topic 1 (the most popular) first
    on_spark = rtt = None
    if p.engine == "spark":
        on_spark = _on_spark(spark, p, w, ens, edges, edge_delay, roots, loss_key)
        # each subscriber's round trip to its Scribe parent, per topic it ever subscribes to (gap recovery)
        rtt = {c: {t: ens.rtt(t, c) for t in w.everyone[c]} for c in w.everyone}
    rows, delays, sequenced = [], {}, {}
    for chains, scenario, loss, recover in _runs(p):
        t0 = time.time()
        scene = _Scene(p, w, chains, scenario, loss, recover)
        seq = _sequencer(p, w, sg, rank, chains, scenario)
        sim, out = scene.run(spark, seq, ens, loss_key, on_spark, rtt, sequenced)
        if scenario != "loss_sweep":
            delays[(chains, scenario)] = out.buffering
        rows.append(scene.row(out, sim))
        scene.log(run, out, time.time() - t0)
    for _, carried in sequenced.values():
        bsp.release(carried)
    return Outcome({"ordering": pd.DataFrame(rows)}, {"delays": delays, "changes": len(w.later)})


def _sequencer(p: TnoOrderingParams, w: Workload, sg: dict, rank: dict, chains: str,
               scenario: str) -> Sequencer:
    """The run's sequencer: groups of every subscription the run holds, or (tno_dynamic_groups) groups
    that follow the subscriptions, laid over the same topics' chains."""
    if scenario != "tno_dynamic_groups":
        return Sequencer(sg, rank, chains=chains, together=w.later.values())
    # a request goes through the client's held and added topics: they must share one chain
    return Sequencer(sg, rank, chains=chains, together=[w.everyone[c] for c in w.later],
                     live=LiveGroups.start(w.subs, range(p.topics), p.causal))


def _runs(p: TnoOrderingParams) -> list[tuple]:
    """(chain rule, scenario, loss, recovery) of every run, in the table's order."""
    # every scenario with the first chain rule; the other rules on the reliable ENS (`tno`)
    runs = [(p.chains[0], x, p.loss if x == "tno_unreliable" else 0.0, None) for x in SCENARIOS]
    runs += [(c, "tno", 0.0, None) for c in p.chains[1:]]
    # loss with and without recovery (first chain rule): ENS and sequencer messages lost alike
    runs += [(p.chains[0], "loss_sweep", x, recover) for x in p.loss_sweep for recover in (False, True)]
    return runs


class _Scene:
    """One run of T3: a chain rule in a scenario, with its loss and recovery."""

    def __init__(self, p: TnoOrderingParams, w: Workload, chains: str, scenario: str, loss: float,
                 recover: bool | None):
        self.p, self.w, self.chains, self.scenario = p, w, chains, scenario
        self.loss, self.recover = loss, recover
        self.unreliable = scenario in ("tno_unreliable", "loss_sweep")
        self.ticks = rp.tick_times(p.ttl_ms / 5, w.span + 20 * p.ttl_ms) if self.unreliable else []

    def fresh(self) -> dict[int, Subscriber]:
        """Every client's ordering layer at the start of the run."""
        p, unreliable = self.p, self.unreliable
        return {c: Subscriber(c, set(self.w.subs[c]), ordered=self.scenario != "no_ordering",
                              ttl=p.ttl_ms if unreliable else None,
                              buffer_size=p.buffer_size if unreliable else None) for c in self.w.subs}

    def run(self, spark, seq: Sequencer, ens: ScribeENS, loss_key: int, on_spark: SparkENS | None,
            rtt: dict | None, sequenced: dict) -> tuple[Simulation, Notified]:
        """Simulate the run (the ENS in the simulation, or in Spark after it); what subscribers were told."""
        p, w = self.p, self.w
        sim_rng = stream(p.seed, Purpose.SEQUENCER_DELAYS)
        recovery = None if self.recover is None else Recovery(
            ens.rtt, stream(p.seed, Purpose.RECOVERY), after_ms=p.recovery_after_ms,
            timeout_ms=p.recovery_timeout_ms, sequencer_loss=self.loss, enabled=self.recover)
        place = contiguous_placement(list(range(p.topics)), p.servers, list(range(p.clients)), p.regions,
                                     sim_rng)
        subscribers = self.fresh()
        sim = Simulation(seq, place, subscribers, ens if on_spark is None else None, sim_rng, loss=self.loss,
                         recovery=recovery, loss_key=loss_key)
        for at, c, t in w.publications:
            sim.at(float(at), sim.publish, int(c), int(t))
        if self.scenario in CHANGING:
            for c, ts in w.later.items():
                sim.at(w.change_at[c], sim.subscribe, c, ts)
        if on_spark is None:
            for at in self.ticks[:1]:
                sim.at(at, sim.tick, p.ttl_ms / 5, w.span + 20 * p.ttl_ms)
            sim.run()
            return sim, _notified(spark, subscribers, sim)
        # the sequencer only (no ENS in the simulation), and what the ENS carries: the same for every
        # scenario with the same chain rule, subscription changes and sequencer losses (ENS losses come later)
        changing = self.scenario in CHANGING
        seq_loss = recovery.sequencer_loss if recovery is not None else 0.0
        key = (self.chains, self.scenario if changing else "", seq_loss)
        if key not in sequenced:
            sim.run()
            sequenced[key] = (sim, on_spark.deliveries(sim, changing))
        sim, carried = sequenced[key]
        moves = {c: (w.change_at[c], w.later[c]) for c in w.later} if changing else {}
        replayed = on_spark.replay(sim, carried, self.fresh(), moves, self.ticks, self.loss, recovery, rtt)
        return sim, _notified_on_spark(replayed, p.clients, sim)

    def row(self, out: Notified, sim: Simulation) -> dict:
        """The run's row of ordering.csv."""
        res, buffering, p = out.check, out.buffering, self.p
        return {"chains": self.chains, "scenario": self.scenario, "loss": self.loss,
                "recovery": bool(self.recover), "subscribers": p.clients, "events": p.events,
                "notifications": out.notifications, "subscriber_pairs": res.subscriber_pairs,
                "violating_pairs": res.violating_pairs, "inverted_event_pairs": res.inverted_event_pairs,
                "undelivered": res.undelivered, "out_of_order_tags": out.out_of_order_tags,
                "released_buffer_full": out.released.full, "released_ttl": out.released.ttl,
                "peak_buffered": out.released.peak, "lost": out.lost,
                "mean_buffering_ms": float(buffering.mean()) if len(buffering) else 0.0,
                "p99_buffering_ms": float(np.percentile(buffering, 99)) if len(buffering) else 0.0,
                "mean_timestamp_latency_ms": float(np.mean(sim.stats.latency)),
                "mean_timestamp_entries": float(np.mean(sim.stats.entries)),
                "mean_tms_visited": float(np.mean(sim.stats.visited)),
                "recovery_messages": out.recovery_messages, "recovered": out.recovered,
                "sequencer_resends": sim.stats.resent, "causal_violations": out.causal_violations}

    def log(self, run: Run, out: Notified, seconds: float) -> None:
        res = out.check
        what = (self.scenario if self.scenario != "loss_sweep"
                else f"loss {self.loss:.1%} {'with' if self.recover else 'without'} recovery")
        run.log(f"{self.chains} chains, {what}: {res.violating_pairs} violating subscriber pairs of "
                f"{res.subscriber_pairs}, {res.undelivered} undelivered, {out.out_of_order_tags} "
                f"out-of-order tags ({seconds:.1f}s)")


def _notified(spark, subscribers: dict[int, Subscriber], sim: Simulation) -> Notified:
    """What the process engine's subscribers were notified of, checked for TNO."""
    logs = {c: [(e[0], e[1]) for e in s.log] for c, s in subscribers.items()}
    return Notified(check(spark, subscribers), int(sum(len(s.log) for s in subscribers.values())),
                    int(sum(e[2] for s in subscribers.values() for e in s.log)), sim.stats.lost,
                    np.array([e[1] - e[3] for s in subscribers.values() for e in s.log]),
                    sim.stats.recovery_messages, sim.stats.recovered, causal_violations(logs, sim.published),
                    functools.reduce(Released.add, (s.released for s in subscribers.values()), Released()))


def _timed_logs(times, clients: int) -> dict[int, list[tuple[int, float]]]:
    """Each subscriber's (event, time) in its notification order, from rows sorted by (sub, pos)."""
    timed: dict[int, list[tuple[int, float]]] = {c: [] for c in range(clients)}
    sub, event = times.column("sub").to_numpy(), times.column("event").to_numpy()
    for c, e, t in zip(sub.tolist(), event.tolist(), times.column(TIME).to_numpy().tolist()):
        timed[c].append((e, t))
    return timed


def _notified_on_spark(replayed, clients: int, sim: Simulation) -> Notified:
    """What the spark engine's subscribers were notified of, checked for TNO (pairwise where cheap)."""
    t0 = time.time()
    notes = replayed.notifications
    times = notes.orderBy("sub", "pos").select("sub", "event", TIME, "arrived", "out_of_order").toArrow()
    at, arrived = times.column(TIME).to_numpy(), times.column("arrived").to_numpy()
    timed = _timed_logs(times, clients) if len(at) <= CAUSAL_UP_TO else None
    causal = causal_violations(timed, sim.published) if timed is not None else None
    if timed is not None and pairwise_is_cheap(clients, len(at)):
        res = pairwise_check({c: [e for e, _ in log] for c, log in timed.items()}, replayed.waiting)
    else:
        res = check_tno(notes.select("sub", "event", F.col("pos").cast("int").alias("pos"), TIME), clients,
                        replayed.waiting)
    _log.info(f"{len(at)} notifications checked ({time.time() - t0:.1f}s)")
    out = Notified(res, len(at), int(np.sum(times.column("out_of_order").to_numpy(zero_copy_only=False))),
                   replayed.lost, at - arrived, replayed.recovery_messages, replayed.recovered, causal,
                   replayed.released)
    replayed.release()
    return out


def report(outcome: Outcome, p: TnoOrderingParams, run: Run) -> None:
    """Plot buffering delay, violations per scenario and the loss sweep; write the summary."""
    table, delays, changes = outcome.tables["ordering"], outcome.notes["delays"], outcome.notes["changes"]
    main, sweep = table[table.scenario != "loss_sweep"], table[table.scenario == "loss_sweep"]
    at = f"\n{p.clients:,} subscribers, {p.topics:,} topics, {p.events:,} events at {p.rate:g}/s"
    with plots.figure(run.path("buffering_delay_cdf.png"), "Delay added by the ordering layer" + at,
                       "buffering delay (ms)", "cumulative fraction of notifications") as ax:
        for (chains, scenario), v in delays.items():
            if len(v) and scenario != "no_ordering":
                plots.cdf(ax, v, label=f"{scenario}, {chains}")
    with plots.figure(run.path("violations.png"),
                       "Subscriber pairs that saw common events in different orders" + at,
                       "scenario", "violating subscriber pairs") as ax:
        bars = ax.bar(range(len(main)), main.violating_pairs)
        ax.bar_label(bars, fontsize=8)   # a zero bar is otherwise not there at all
        ax.set_xticks(range(len(main)), main.scenario + ", " + main.chains, rotation=30, ha="right")
    if len(sweep):
        with plots.figure(run.path("loss_recovery.png"),
                           f"ENS and sequencer loss ({p.chains[0]} chains)" + at,
                           "loss probability", "count") as ax:
            for recover, t in sweep.groupby("recovery"):
                how = "with recovery" if recover else "without recovery"
                line = ax.plot(t.loss, t.out_of_order_tags, marker="o", label=f"out-of-order tags, {how}")[0]
                ax.plot(t.loss, t.violating_pairs, marker="x", linestyle="--", color=line.get_color(),
                        label=f"violating subscriber pairs, {how}")
            plots.log_x(ax, sweep.loss)
    cols = ["loss", "recovery", "notifications", "violating_pairs", "undelivered", "out_of_order_tags",
            "lost", "recovery_messages", "recovered", "sequencer_resends", "mean_buffering_ms",
            "p99_buffering_ms", "mean_timestamp_latency_ms"]
    run.path("summary.md").write_text(
        f"# tno_ordering\n\n{p.clients} subscribers (of {p.nodes} Scribe nodes), {p.topics} topics "
        f"({p.popularity} popularity, {p.topics_per_client} topics each), {p.events} events at {p.rate:g}/s, "
        f"per-hop jitter ±{100 * p.jitter:g}%, {changes} subscription changes"
        + (f" (of the {p.subscription_changes} clients drawn to change, "
           f"{p.subscription_changes - changes} drew only topics they had)"
           if changes < p.subscription_changes else "")
        + f", loss {100 * p.loss:g}% in the "
        f"unreliable run (TTL {p.ttl_ms:g} ms, buffer {p.buffer_size}), {'causal' if p.causal else 'TNO'} "
        f"sequencing groups, seed {p.seed}. Chain rules: {', '.join(p.chains)} (etree: up the elimination "
        "tree; interval: every TM between in precedence order; literal: group members only, which can leave "
        "events buffered forever: `undelivered`). TNO is checked, not assumed: every pair of subscribers, "
        "every pair of events both were notified of.\n\n" + plots.markdown_table(main, ".1f") + "\n\n"
        f"## Loss with and without recovery ({p.chains[0]} chains)\n\nENS deliveries and sequencer "
        "messages are lost with the given probability; a lost sequencer message is sent again after "
        f"{p.recovery_timeout_ms:g} ms (both arms). With recovery, a subscriber whose buffered events "
        f"wait on a missing slot {p.recovery_after_ms:g} ms after an arrival asks its Scribe parent for "
        "it (one tree hop there and back; requests and replies lost alike; asked again after "
        f"{p.recovery_timeout_ms:g} ms); TTL and buffer stay as the backstop. Same random ENS losses in "
        "both arms.\n\n"
        + plots.markdown_table(sweep[cols].assign(loss=(100 * sweep.loss).map("{:g}%".format)), ".1f")
        + "\n")
