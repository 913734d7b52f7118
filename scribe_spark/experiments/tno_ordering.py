"""Experiment tno_ordering (SPEC T3): TNO over Scribe trees whose per-hop delays reorder events.

The ENS is the Scribe layer: a Pastry overlay on a transit-stub network, one tree per topic
built by the subscribe supersteps. An event travels publisher -> root (Pastry route) and down
the tree; every hop's physical delay is multiplied by an independent 1 + jitter * U(-1, 1), so
deliveries reorder. The same workload runs in four scenarios: the ordering layer on, off, with
subscription changes during the run, and with an unreliable ENS (loss, TTL, bounded buffer).
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from scribe_spark import bsp, report
from scribe_spark.cli import Run
from scribe_spark.config import TnoOrderingParams
from scribe_spark.pastry import overlay as ov
from scribe_spark.scribe import topics as tp
from scribe_spark.scribe import trees as tr
from scribe_spark.session import spark_session
from scribe_spark.tno import groups
from scribe_spark.tno.ordering import Subscriber, check_tno
from scribe_spark.tno.scribe_ens import ScribeENS
from scribe_spark.tno.sequencer import Sequencer
from scribe_spark.tno.simulation import Simulation, contiguous_placement
from scribe_spark.workloads.network import make_ring, shared_network
from scribe_spark.workloads.popularity import draw_subscriptions, popularity

SCENARIOS = ("tno", "no_ordering", "tno_subscription_changes", "tno_unreliable")


def run(p: TnoOrderingParams, run: Run) -> None:
    """Build the Scribe ENS, then run the four scenarios and check TNO over all logs."""
    spark = spark_session(run.name)
    rng = np.random.default_rng([p.seed, 7])
    routers, _ = shared_network(p, p.seed)
    ring = make_ring(p.nodes, p, np.random.default_rng([p.seed, p.nodes]), routers)
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
    src = np.repeat(client_nodes, p.topics)
    key_t = np.tile(np.arange(p.topics), p.clients)
    with bsp.quiet():
        routed = ov.route(overlay, ov.messages_frame(spark, src, topics.hi[key_t], topics.lo[key_t]))
        routed = routed.toPandas().sort_values("mid")
    pub_to_root = routed.distance.to_numpy().reshape(p.clients, p.topics)
    edge_delay = ring.prox.dist(edges.src.to_numpy(), edges.dst.to_numpy())
    node_to_client = {int(n): i for i, n in enumerate(client_nodes)}
    edges_c = edges.assign(src=edges.src.map(lambda n: node_to_client.get(int(n), -1 - int(n))),
                           dst=edges.dst.map(lambda n: node_to_client.get(int(n), -1 - int(n))))
    roots_c = {t: node_to_client.get(int(n), -1 - int(n)) for t, n in roots.items()}
    ens = ScribeENS(edges_c, roots_c, pub_to_root, edge_delay, p.jitter)
    run.log(f"Scribe ENS ready: {len(edges)} tree edges over {p.topics} topics ({time.time() - t0:.1f}s)")
    overlay.unpersist()

    sg = groups.local_groups(everyone, causal=p.causal)
    for t in range(p.topics):
        sg.setdefault(t, {t})
    rank = {t: t for t in range(p.topics)}   # precedence: topic rank (= popularity order)
    span = 1000.0 * p.events / p.rate
    pub_rng = np.random.default_rng([p.seed, 8])
    publications = sorted(zip(pub_rng.uniform(0, span, p.events), pub_rng.integers(0, p.clients, p.events),
                              pub_rng.choice(p.topics, p.events, p=probs)))
    change_at = {c: float(pub_rng.uniform(0.2 * span, 0.8 * span)) for c in later}

    rows, delays = [], {}
    for chains, scenario in [(c, x) for c in p.chains for x in SCENARIOS]:
        t0 = time.time()
        sim_rng = np.random.default_rng([p.seed, 9])
        unreliable = scenario == "tno_unreliable"
        seq = Sequencer(sg, rank, chains=chains, together=later.values())
        place = contiguous_placement(list(range(p.topics)), p.servers, list(range(p.clients)), p.regions,
                                     sim_rng)
        subscribers = {c: Subscriber(c, set(subs[c]), ordered=scenario != "no_ordering",
                                     ttl=p.ttl_ms if unreliable else None,
                                     buffer_size=p.buffer_size if unreliable else None) for c in subs}
        sim = Simulation(seq, place, subscribers, ens, sim_rng, loss=p.loss if unreliable else 0.0)
        for at, c, t in publications:
            sim.at(float(at), sim.publish, int(c), int(t))
        if scenario == "tno_subscription_changes":
            for c, ts in later.items():
                sim.at(change_at[c], sim.subscribe, c, ts)
        if unreliable:
            sim.at(0.0, sim.tick, p.ttl_ms / 5, span + 20 * p.ttl_ms)
        sim.run()
        logs = {c: [e[0] for e in s.log] for c, s in subscribers.items()}
        res = check_tno(logs, sum(len(s.waiting) for s in subscribers.values()))
        buffering = np.array([e[1] - e[3] for s in subscribers.values() for e in s.log])
        delays[(chains, scenario)] = buffering
        rows.append({"chains": chains, "scenario": scenario, "subscribers": p.clients, "events": p.events,
                     "notifications": int(sum(len(s.log) for s in subscribers.values())),
                     "subscriber_pairs": res.subscriber_pairs, "violating_pairs": res.violating_pairs,
                     "inverted_event_pairs": res.inverted_event_pairs, "undelivered": res.undelivered,
                     "out_of_order_tags": int(sum(e[2] for s in subscribers.values() for e in s.log)),
                     "lost": sim.stats.lost,
                     "mean_buffering_ms": float(buffering.mean()) if len(buffering) else 0.0,
                     "p99_buffering_ms": float(np.percentile(buffering, 99)) if len(buffering) else 0.0,
                     "mean_timestamp_latency_ms": float(np.mean(sim.stats.latency))})
        run.log(f"{chains} chains, {scenario}: {res.violating_pairs} violating subscriber pairs of "
                f"{res.subscriber_pairs}, "
                f"{res.undelivered} undelivered, {rows[-1]['out_of_order_tags']} out-of-order tags "
                f"({time.time() - t0:.1f}s)")
    table = pd.DataFrame(rows)
    report.write_csv(table, run.path("ordering.csv"))
    with report.figure(run.path("buffering_delay_cdf.png"), "Delay added by the ordering layer",
                       "buffering delay (ms)", "cumulative fraction of notifications") as ax:
        for (chains, scenario), v in delays.items():
            v = np.sort(v)
            if len(v) and scenario != "no_ordering":
                ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", label=f"{scenario}, {chains}")
    with report.figure(run.path("violations.png"),
                       "Subscriber pairs that saw common events in different orders",
                       "scenario", "violating subscriber pairs") as ax:
        ax.bar(range(len(table)), table.violating_pairs)
        ax.set_xticks(range(len(table)), table.scenario + ", " + table.chains, rotation=30, ha="right")
    run.path("summary.md").write_text(
        f"# tno_ordering\n\n{p.clients} subscribers (of {p.nodes} Scribe nodes), {p.topics} topics "
        f"({p.popularity} popularity, {p.topics_per_client} topics each), {p.events} events at {p.rate:g}/s, "
        f"per-hop jitter ±{p.jitter:.0%}, {len(later)} subscription changes, loss {p.loss:.0%} in the "
        f"unreliable run (TTL {p.ttl_ms:g} ms, buffer {p.buffer_size}), {'causal' if p.causal else 'TNO'} "
        f"sequencing groups, seed {p.seed}. Chain rules: {', '.join(p.chains)} (etree: up the elimination "
        "tree; interval: every TM between in precedence order; literal: group members only, which can leave "
        "events buffered forever: `undelivered`). TNO is checked, not assumed: every pair of subscribers, "
        "every pair of events both were notified of.\n\n" + report.markdown_table(table, ".1f") + "\n")
