"""Experiment tno_sequencer (SPEC T2): latency, throughput and bandwidth of the multistage sequencer.

`servers` servers host the topic managers in contiguous ranges of the precedence order;
clients and servers are spread over `regions` (same region: short link 10 ± 2 ms, else long
link 100 ± 10 ms, FIFO). A TM serves one message at a time and spends `service_ms` on a
stage that reads or writes the timestamp; relays (TMs inside a chain's interval but outside
the event's sequencing group) wait their turn but cost nothing. Sequencing groups come from
the Spark self-join. Each point publishes `rate` x `duration_s` events at uniform random
times from random clients on topics drawn by popularity.

Two sweeps per popularity model: timestamp latency against the event rate at `service_ms`,
and throughput against the service time at the highest rate. The measured throughput is
checked against the capacity the chains predict: 1 / (service time x the largest expected
number of timestamp stages per event at one TM).
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from scribe_spark import report
from scribe_spark.cli import Run
from scribe_spark.config import TnoSequencerParams
from scribe_spark.session import spark_session
from scribe_spark.tno import groups
from scribe_spark.tno.sequencer import Sequencer, chain_profile, precedence_rank
from scribe_spark.tno.simulation import Simulation, contiguous_placement
from scribe_spark.workloads.popularity import describe, draw_subscriptions, model_index, popularity


def simulate(seq_groups: dict, rank: dict, placement, probs: np.ndarray, rate: float, duration_s: float,
             service_ms: float, clients: int, seed: list) -> Simulation:
    """Run one point: rate x duration_s timestamp requests; return the finished simulation."""
    rng = np.random.default_rng(seed)
    n = max(1, int(round(rate * duration_s)))
    at = np.sort(rng.uniform(0.0, 1000.0 * duration_s, n))
    who = rng.integers(0, clients, n)
    what = rng.choice(len(probs), n, p=probs)
    sim = Simulation(Sequencer(seq_groups, rank), placement, {}, None, rng, service_ms=service_ms)
    for t, c, topic in zip(at, who, what):
        sim.at(float(t), sim.publish, int(c), int(topic))
    sim.run()
    return sim


def measure(sim: Simulation, duration_s: float) -> dict:
    """Latency statistics over all requests; throughput = completions per second in the second half."""
    lat = np.asarray(sim.stats.latency)
    done = np.asarray(sim.stats.completed_at)
    end = 1000.0 * duration_s
    in_window = ((done >= end / 2) & (done < end)).sum()
    return {"events": sim.requests, "completed": len(lat), "mean_latency_ms": lat.mean(),
            "p50_latency_ms": np.percentile(lat, 50), "p95_latency_ms": np.percentile(lat, 95),
            "p99_latency_ms": np.percentile(lat, 99), "max_latency_ms": lat.max(),
            "throughput_per_s": in_window / (duration_s / 2),
            "inter_server_bytes": sum(sim.stats.bytes_out.values())}


def _outcome(sim: Simulation, duration_s: float) -> dict:
    """What the tables and plots need from one finished simulation (kept as a sweep point)."""
    return {"measured": measure(sim, duration_s), "latency": np.asarray(sim.stats.latency),
            "bytes_out": dict(sim.stats.bytes_out), "tm_work": dict(sim.tm_work)}


def run(p: TnoSequencerParams, run: Run) -> None:
    """Both sweeps for every popularity model, then tables, plots and the summary."""
    spark = spark_session(run.name)
    rank = precedence_rank(p.topics, p.precedence)
    rows, bandwidth, latencies = [], [], {}
    for model in p.popularity:
        t0 = time.time()
        probs = popularity(p.topics, model)
        rng = np.random.default_rng([p.seed, model_index(model)])
        sub, top = draw_subscriptions(p.clients, p.topics_per_client, probs, rng)
        frame = spark.createDataFrame(pd.DataFrame({groups.SUBSCRIBER: sub.astype(np.int32),
                                                    groups.TOPIC: top.astype(np.int32)}))
        sg = groups.collect_groups(groups.sequencing_groups(frame, causal=p.causal))
        for t in range(p.topics):
            sg.setdefault(t, {t})   # nobody subscribes: a group of its own (its events reach no one)
        by_precedence = sorted(range(p.topics), key=rank.get)
        place = contiguous_placement(by_precedence, p.servers, list(range(p.clients)), p.regions, rng)
        profile = chain_profile(Sequencer(sg, rank), place.server_of, probs)
        visits = profile.pop("tm_visits")
        run.log(f"{model}: groups ready ({len(sub):,} subscriptions); an event visits "
                f"{profile['mean_tms_visited']:.1f} TMs ({profile['mean_timestamp_stages']:.1f} timestamp "
                f"stages) on {profile['mean_servers_visited']:.2f} servers, timestamps of "
                f"{profile['mean_timestamp_entries']:.1f} entries ({time.time() - t0:.1f}s)")
        points = [("rate", r, p.service_ms) for r in p.rates]
        points += [("service", max(p.rates), s) for s in p.service_sweep_ms]
        for sweep, rate, service in points:
            t0 = time.time()
            # both sweeps share the point (max rate, service_ms): same key, simulated once
            seed = [p.seed, model_index(model), int(rate), int(service * 1e6)]
            sim = run.point(f"{model} rate={rate:g} service={service:g}",
                            lambda: _outcome(simulate(sg, rank, place, probs, rate, p.duration_s, service,
                                                      p.clients, seed), p.duration_s))
            capacity = 1000.0 / (service * visits.max()) if service > 0 else float("inf")
            row = {"popularity": model, "sweep": sweep, "rate_per_s": rate, "service_ms": service,
                   **sim["measured"], "capacity_per_s": capacity, **profile}
            rows.append(row)
            run.log(f"{model} {sweep} sweep, {rate:g}/s, service {service:g} ms: latency mean "
                    f"{row['mean_latency_ms']:.1f} ms (p99 {row['p99_latency_ms']:.1f}), throughput "
                    f"{row['throughput_per_s']:.0f}/s (capacity {capacity:.0f}/s) ({time.time() - t0:.1f}s)")
            if sweep == "rate":
                latencies[(model, rate)] = sim["latency"]
            if sweep == "rate" and rate == max(p.rates):
                total = max(1, sum(sim["bytes_out"].values()))
                stages = sum(sim["tm_work"].values())
                for s in range(p.servers):
                    work = sum(v for tm, v in sim["tm_work"].items() if place.server_of[tm] == s)
                    bandwidth.append({"popularity": model, "server": s, "region": place.server_region[s],
                                      "inter_server_bytes": sim["bytes_out"].get(s, 0),
                                      "bandwidth_share": sim["bytes_out"].get(s, 0) / total,
                                      "timestamp_stage_share": work / max(1, stages)})
    table, bw = pd.DataFrame(rows), pd.DataFrame(bandwidth)
    report.write_csv(table, run.path("sequencer.csv"))
    report.write_csv(bw, run.path("bandwidth.csv"))
    _plots(p, table, bw, latencies, run)
    _summary(p, table, bw, run)


def _plots(p: TnoSequencerParams, table: pd.DataFrame, bw: pd.DataFrame, latencies: dict, run: Run) -> None:
    rate = table[table.sweep == "rate"]
    with report.figure(run.path("latency_vs_rate.png"),
                       f"Timestamp latency (service {p.service_ms:g} ms per stage)",
                       "event rate (events/s)", "latency (ms)") as ax:
        for model in p.popularity:
            t = rate[rate.popularity == model]
            ax.plot(t.rate_per_s, t.mean_latency_ms, marker="o", label=f"{model}: mean")
            ax.plot(t.rate_per_s, t.p99_latency_ms, marker="x", linestyle="--", label=f"{model}: p99")
        ax.set_xscale("log")
    with report.figure(run.path("latency_cdf.png"), "Timestamp latency distribution", "latency (ms)",
                       "cumulative fraction of events") as ax:
        for (model, r), v in latencies.items():
            if r in (min(p.rates), max(p.rates)):
                v = np.sort(v)
                ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", label=f"{model}, {r:g}/s")
    svc = table[table.sweep == "service"]
    with report.figure(run.path("throughput_vs_service.png"),
                       f"Throughput at {max(p.rates):g} events/s offered",
                       "service time per timestamp stage (ms)", "events/s") as ax:
        for model in p.popularity:
            t = svc[svc.popularity == model]
            line = ax.plot(t.service_ms, t.throughput_per_s, marker="o", label=f"{model}: measured")[0]
            cap = t[np.isfinite(t.capacity_per_s)]
            ax.plot(cap.service_ms, cap.capacity_per_s, linestyle=":", color=line.get_color(),
                    label=f"{model}: predicted capacity")
        ax.axhline(max(p.rates), color="grey", linewidth=0.8, label="offered")
        ax.set_yscale("log")
    with report.figure(run.path("bandwidth_share.png"), "Share of inter-server bandwidth per server",
                       "server", "share of inter-server bytes") as ax:
        width = 0.8 / max(1, len(p.popularity))
        for i, model in enumerate(p.popularity):
            t = bw[bw.popularity == model]
            ax.bar(t.server + i * width, t.bandwidth_share, width=width, label=model)
        ax.set_xticks(np.arange(p.servers) + 0.4 - width / 2, [str(s) for s in range(p.servers)])


def _summary(p: TnoSequencerParams, table: pd.DataFrame, bw: pd.DataFrame, run: Run) -> None:
    cols = ["popularity", "sweep", "rate_per_s", "service_ms", "events", "mean_latency_ms", "p99_latency_ms",
            "throughput_per_s", "capacity_per_s"]
    chain = ["mean_tms_visited", "mean_timestamp_stages", "mean_servers_visited", "mean_timestamp_entries"]
    shape = table.groupby("popularity", sort=False)[chain].first().reset_index()
    shape.insert(1, "law", [describe(p.topics, m)["law"] for m in shape.popularity])
    run.path("summary.md").write_text(
        f"# tno_sequencer\n\n{p.servers} servers x {p.topics // p.servers} TMs (contiguous ranges of the "
        f"precedence order, precedence {p.precedence}), {p.clients} clients with {p.topics_per_client} "
        f"topics each, {p.regions} regions (short links 10 ± 2 ms, long 100 ± 10 ms), {p.duration_s:g} s of "
        f"publications per point, {'causal' if p.causal else 'TNO'} sequencing groups, seed {p.seed}. "
        "Latency: request sent by the client until the finished timestamp is back at the client. "
        "Throughput: completions per second over the second half of the run; capacity: 1 / (service time x "
        "the largest expected number of timestamp stages per event at one TM), predicted from the chains "
        "alone.\n\n## Chains (expected per event)\n\n" + report.markdown_table(shape, ".2f") +
        "\n\n## Latency and throughput\n\n" + report.markdown_table(table[cols], ".1f") +
        f"\n\n## Inter-server bandwidth at {max(p.rates):g} events/s\n\n"
        + report.markdown_table(bw, ".3f") + "\n")
