"""Experiment tno_sequencer (T2): latency, throughput and bandwidth of the multistage sequencer.

Two deployments. `geo`, the TNO paper's: one server per site; TMs of topics in contiguous id
ranges (topics 1-200 on server 1, ...); clients in equal blocks per site; popularity per site,
each site ranking its own topics first (its server hosts the topics most popular there) and
the other sites' after them, the popularity law over that ranking; a client publishes and
subscribes by its site's law. `global`: one popularity over topic ids; TMs in contiguous ranges
of the precedence order (server 1 hosts the highest-ranked); clients and servers spread over
`regions` at random. Links: same site/region short (10 ± 2 ms), else long (100 ± 10 ms), FIFO.
A server has `server_cores`
cores shared by its TMs and one FIFO queue; a TM serves one message at a time, spends
`service_ms` on a stage that reads or writes the timestamp and `message_ms` on every network
message it receives or sends (relays, TMs on a chain outside the event's group, pay only that).
Sequencing groups come from the Spark self-join. Each point publishes `rate` x `duration_s`
events at uniform random times from random clients.

Three sweeps per popularity model: latency and throughput against the event rate (at
`service_ms`, `topics_per_client`), against the service time (at the highest rate), and
against the total number of subscriptions (`subscription_sweep` topics per client at
`subscription_rate`). The measured throughput is checked against the capacity the chains
predict: the rate at which the busiest TM (stages x `service_ms` + messages x `message_ms` per
event) or the busiest server (the same over its TMs, divided by its cores) is busy all the
time. Per server: the percentage of outgoing bandwidth, bytes of timestamps forwarded to other
servers / bytes of all timestamp requests the server received.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from scribe_spark import report as plots
from scribe_spark.config import TnoSequencerParams
from scribe_spark.experiments.outputs import Outcome
from scribe_spark.experiments.run import Run
from scribe_spark.laws import describe, model_index, popularity
from scribe_spark.spark.arrow import local_frame
from scribe_spark.spark.session import spark_session
from scribe_spark.streams import stream
from scribe_spark.tno import groups
from scribe_spark.tno.sequencer import Sequencer, chain_profile, precedence_rank, saturation
from scribe_spark.tno.simulation import Placement, Simulation, contiguous_placement, site_placement
from scribe_spark.workloads.popularity import draw_subscriptions, site_popularity


@dataclass
class Setup:
    """One popularity model and topics-per-client value: groups, placement, who publishes what."""

    groups: dict
    place: Placement
    client_site: np.ndarray     # each client's row of site_probs (all 0 in the global deployment)
    site_probs: np.ndarray      # [sites, topics]: topic probabilities of a client's publications
    event_probs: np.ndarray     # topic probabilities of a random client's event
    subscriptions: int
    remote_share: float         # subscriptions to a topic whose TM sits in another site/region


def setup(spark, p: TnoSequencerParams, model: str, k: int, rank: dict) -> Setup:
    """Draw k topics per client, compute the sequencing groups, place TMs and clients."""
    rng = stream(p.seed, None, model_index(model), k)
    if p.deployment == "geo":
        place = site_placement(p.topics, p.servers, p.clients)
        client_site = np.array([place.client_region[c] for c in range(p.clients)], dtype=np.int64)
        site_probs = site_popularity([[t for t in range(p.topics) if place.server_of[t] == s]
                                      for s in range(p.servers)], model)
        drawn = []
        for s in range(p.servers):
            members = np.flatnonzero(client_site == s)
            sub, top = draw_subscriptions(len(members), k, site_probs[s], rng)
            drawn.append((members[sub], top))
        sub, top = (np.concatenate(x) for x in zip(*drawn))
    else:
        client_site = np.zeros(p.clients, dtype=np.int64)
        site_probs = popularity(p.topics, model)[None, :]
        sub, top = draw_subscriptions(p.clients, k, site_probs[0], rng)
        by_precedence = sorted(range(p.topics), key=lambda t: -rank[t])   # server 1: the highest-ranked
        place = contiguous_placement(by_precedence, p.servers, list(range(p.clients)), p.regions, rng)
    frame = local_frame(spark, pd.DataFrame({groups.SUBSCRIBER: sub.astype(np.int32),
                                             groups.TOPIC: top.astype(np.int32)}))
    sg = groups.collect_groups(groups.sequencing_groups(frame, causal=p.causal))
    for t in range(p.topics):
        sg.setdefault(t, {t})   # nobody subscribes: a group of its own (its events reach no one)
    remote = np.mean([place.server_region[place.server_of[t]] != place.client_region[c]
                      for c, t in zip(sub.tolist(), top.tolist())])
    event_probs = np.bincount(client_site, minlength=len(site_probs)) / p.clients @ site_probs
    return Setup(sg, place, client_site, site_probs, event_probs, len(sub), float(remote))


def simulate_point(s: Setup, rank: dict, chains: str, rate: float, duration_s: float, service_ms: float,
                   rng: np.random.Generator, message_ms: float = 0.0, cores: int | None = None) -> Simulation:
    """Run one point: rate x duration_s timestamp requests; return the finished simulation."""
    n = max(1, int(round(rate * duration_s)))
    at = np.sort(rng.uniform(0.0, 1000.0 * duration_s, n))
    who = rng.integers(0, len(s.client_site), n)
    site = s.client_site[who]
    what = np.empty(n, dtype=np.int64)
    for x, probs in enumerate(s.site_probs):
        pick = site == x
        what[pick] = rng.choice(len(probs), int(pick.sum()), p=probs)
    sim = Simulation(Sequencer(s.groups, rank, chains=chains), s.place, {}, None, rng, service_ms=service_ms,
                     message_ms=message_ms, cores=cores)
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
            "bytes_out": dict(sim.stats.bytes_out), "bytes_in": dict(sim.stats.bytes_in),
            "tm_work": dict(sim.tm_work)}


def _bandwidth(p: TnoSequencerParams, model: str, chains: str, s: Setup, sim: dict) -> list[dict]:
    """Per server: bytes forwarded to other servers, bytes received, and their ratio in percent."""
    total = max(1, sum(sim["bytes_out"].values()))
    stages = sum(sim["tm_work"].values())
    rows = []
    for server in range(p.servers):
        out, handled = sim["bytes_out"].get(server, 0), sim["bytes_in"].get(server, 0)
        work = sum(v for tm, v in sim["tm_work"].items() if s.place.server_of[tm] == server)
        rows.append({"popularity": model, "chains": chains, "server": server + 1,   # numbered from 1
                     "region": s.place.server_region[server] + 1,
                     "inter_server_bytes": out, "handled_bytes": handled,
                     "outgoing_percent": 100.0 * out / handled if handled else 0.0,
                     "bandwidth_share": out / total, "timestamp_stage_share": work / max(1, stages)})
    return rows


def simulate(p: TnoSequencerParams, run: Run) -> Outcome:
    """The three sweeps (rate, service time, subscriptions) for every popularity model and chain rule."""
    spark = spark_session(run.name)
    rank = precedence_rank(p.topics, p.precedence)
    rows, bandwidth, latencies, capacity = [], [], {}, []
    points = [("rate", p.topics_per_client, r, p.service_ms) for r in p.rates]
    points += [("service", p.topics_per_client, max(p.rates), s) for s in p.service_sweep_ms]
    points += [("subscriptions", k, p.subscription_rate, p.service_ms) for k in p.subscription_sweep]
    for model in p.popularity:
        setups: dict[int, Setup] = {}
        for chains in p.chains:
            profiles: dict[int, tuple[dict, np.ndarray]] = {}
            # the sweep against subscriptions with the first chain rule only (long chains simulate slowly)
            mine = [x for x in points if x[0] != "subscriptions" or chains == p.chains[0]]
            for sweep, k, rate, service in mine:
                s = _setup_of(setups, spark, p, run, model, k, rank)
                if k not in profiles:
                    profiles[k] = _profile(run, s, rank, model, k, chains)
                    if k == p.topics_per_client:
                        capacity.append(_predicted(p, model, chains, profiles[k]))
                row, sim = _point(p, run, s, rank, model, chains, k, rate, service, profiles[k])
                rows.append({"sweep": sweep, **row})
                if sweep == "rate":
                    latencies[(model, chains, rate)] = sim["latency"]
                if sweep == "rate" and rate == max(p.rates):
                    bandwidth += _bandwidth(p, model, chains, s, sim)
    table = pd.DataFrame(rows)
    table = table[["popularity", "chains", "sweep"] + [c for c in table.columns
                                                       if c not in ("popularity", "chains", "sweep")]]
    tables = {"sequencer": table, "bandwidth": pd.DataFrame(bandwidth),
              "capacity": _capacity_table(pd.DataFrame(capacity), table)}
    return Outcome(tables, {"latencies": latencies})


def _predicted(p: TnoSequencerParams, model: str, chains: str, profiled: tuple[dict, dict]) -> dict:
    """The saturation rate the chains and the costs predict for the rate sweep's setup."""
    sat = saturation(profiled[1], p.service_ms, p.message_ms, p.server_cores)
    return {"popularity": model, "chains": chains, "topics_per_client": p.topics_per_client,
            "service_ms": p.service_ms, "message_ms": p.message_ms, "server_cores": p.server_cores,
            "predicted_per_s": sat.rate_per_s, "bottleneck": sat.bottleneck,
            "bottleneck_stages_per_event": sat.stages, "bottleneck_messages_per_event": sat.messages}


SATURATED = 0.9    # a point whose throughput falls below this share of the offered rate is saturated (the
                   # share completed in a short run varies by a few per cent below saturation)


def _capacity_table(predicted: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Beside each predicted saturation rate, where the rate sweep saw throughput fall behind the offered
    rate, and the highest throughput it simulated."""
    rows = []
    for (model, chains), t in table[table.sweep == "rate"].groupby(["popularity", "chains"], sort=False):
        behind = t[t.throughput_per_s < SATURATED * t.rate_per_s]
        rows.append({"popularity": model, "chains": chains,
                     "saturated_from_rate_per_s": behind.rate_per_s.min() if len(behind) else float("nan"),
                     "simulated_peak_per_s": t.throughput_per_s.max()})
    return predicted.merge(pd.DataFrame(rows), on=["popularity", "chains"], how="left")


def _setup_of(setups: dict, spark, p: TnoSequencerParams, run: Run, model: str, k: int, rank: dict) -> Setup:
    """The setup of `k` topics per client under `model`, made once per model."""
    if k not in setups:
        t0 = time.time()
        setups[k] = setup(spark, p, model, k, rank)
        run.log(f"{model}, {k} topics/client: groups ready ({setups[k].subscriptions:,} "
                f"subscriptions, {setups[k].remote_share:.1%} to another site's TMs) "
                f"({time.time() - t0:.1f}s)")
    return setups[k]


def _profile(run: Run, s: Setup, rank: dict, model: str, k: int, chains: str) -> tuple[dict, dict]:
    """What the chains predict per event (TMs, stages, servers, entries), and each TM's and each
    server's expected work per event."""
    profile = chain_profile(Sequencer(s.groups, rank, chains=chains), s.place.server_of, s.event_probs)
    loads = {k: profile.pop(k) for k in ("tm_visits", "tm_messages", "server_stages", "server_messages")}
    run.log(f"{model}, {k} topics/client, {chains} chains: an event visits "
            f"{profile['mean_tms_visited']:.1f} TMs ({profile['mean_timestamp_stages']:.1f} "
            f"timestamp stages) on {profile['mean_servers_visited']:.2f} servers, timestamps "
            f"of {profile['mean_timestamp_entries']:.1f} entries")
    return profile, loads


def _point(p: TnoSequencerParams, run: Run, s: Setup, rank: dict, model: str, chains: str, k: int,
           rate: float, service: float, profiled: tuple[dict, dict]) -> tuple[dict, dict]:
    """Simulate one point (or take it from an interrupted run); its table row and what the plots need."""
    profile, loads = profiled
    t0 = time.time()
    draws = stream(p.seed, None, model_index(model), k, int(rate), int(service * 1e6))
    # sweeps that share a point (same k, rate, service) simulate it once
    sim = run.point(f"{model} {chains} k={k} rate={rate:g} service={service:g}",
                    lambda: _outcome(simulate_point(s, rank, chains, rate, p.duration_s, service, draws,
                                                    p.message_ms, p.server_cores), p.duration_s))
    capacity = saturation(loads, service, p.message_ms, p.server_cores).rate_per_s
    row = {"popularity": model, "chains": chains, "topics_per_client": k,
           "subscriptions": s.subscriptions, "rate_per_s": rate, "service_ms": service,
           **sim["measured"], "capacity_per_s": capacity, **profile,
           "remote_subscription_share": s.remote_share}
    run.log(f"{model} {chains}, {k} topics/client, {rate:g}/s, service {service:g} ms: latency mean "
            f"{row['mean_latency_ms']:.1f} ms (p99 {row['p99_latency_ms']:.1f}), throughput "
            f"{row['throughput_per_s']:.0f}/s (capacity {capacity:.0f}/s) ({time.time() - t0:.1f}s)")
    return row, sim


def report(outcome: Outcome, p: TnoSequencerParams, run: Run) -> None:
    """Plot latency and throughput against rate, service time and subscriptions, and bandwidth per server."""
    table, bw = outcome.tables["sequencer"], outcome.tables["bandwidth"]
    _plots(p, table, bw, outcome.notes["latencies"], run)
    _summary(p, table, bw, run)


def _variants(p: TnoSequencerParams, table: pd.DataFrame):
    """Yield (label, rows) for every (popularity model, chain rule) in the table."""
    for model in p.popularity:
        for chains in p.chains:
            label = model if len(p.chains) == 1 else f"{model}, {chains}"
            yield label, table[(table.popularity == model) & (table.chains == chains)]


def _plots(p: TnoSequencerParams, table: pd.DataFrame, bw: pd.DataFrame, latencies: dict, run: Run) -> None:
    rate = table[table.sweep == "rate"]
    with plots.figure(run.path("latency_vs_rate.png"),
                       f"Timestamp latency (service {p.service_ms:g} ms per stage)",
                       "event rate (events/s)", "latency (ms)") as ax:
        for label, t in _variants(p, rate):
            line = ax.plot(t.rate_per_s, t.mean_latency_ms, marker="o", label=f"{label}: mean")[0]
            ax.plot(t.rate_per_s, t.p99_latency_ms, marker="x", linestyle="--", color=line.get_color(),
                    label=f"{label}: p99")
        plots.log_x(ax, rate.rate_per_s)
    with plots.figure(run.path("throughput_vs_rate.png"),
                       f"Throughput (service {p.service_ms:g} ms per stage)", "offered event rate (events/s)",
                       "measured throughput (timestamps/s)") as ax:
        for label, t in _variants(p, rate):
            ax.plot(t.rate_per_s, t.throughput_per_s, marker="o", label=label)
        ax.plot([min(p.rates), max(p.rates)], [min(p.rates), max(p.rates)], color="grey", linewidth=0.8,
                label="offered")
        plots.log_x(ax, rate.rate_per_s)
        ax.set_yscale("log")
    with plots.figure(run.path("latency_cdf.png"),
                       f"Timestamp latency distribution (service {p.service_ms:g} ms per stage)",
                       "latency (ms)", "cumulative fraction of events") as ax:
        styles = ("-", "--", ":", "-.")   # one per chain rule: more series than the colour cycle holds
        for (model, chains, r), v in latencies.items():
            if r in (min(p.rates), max(p.rates)):
                plots.cdf(ax, v, label=f"{model}, {chains}, {r:g}/s",
                           linestyle=styles[list(p.chains).index(chains) % len(styles)])
    if p.service_sweep_ms:
        with plots.figure(run.path("throughput_vs_service.png"),
                           f"Throughput at {max(p.rates):g} events/s offered",
                           "service time per timestamp stage (ms)", "events/s") as ax:
            for label, t in _variants(p, table[table.sweep == "service"]):
                line = ax.plot(t.service_ms, t.throughput_per_s, marker="o", label=f"{label}: measured")[0]
                cap = t[np.isfinite(t.capacity_per_s)]
                ax.plot(cap.service_ms, cap.capacity_per_s, linestyle=":", color=line.get_color(),
                        label=f"{label}: predicted capacity")
            ax.axhline(max(p.rates), color="grey", linewidth=0.8, label="offered")
            ax.set_yscale("log")
    variants = list(_variants(p, bw))
    width = 0.8 / max(1, len(variants))
    for png, column, title, ylabel in (
            ("bandwidth_share", "bandwidth_share", "Share of inter-server bandwidth per server",
             "share of inter-server bytes"),
            ("outgoing_bandwidth", "outgoing_percent", f"Outgoing bandwidth per server at {max(p.rates):g} "
             "events/s", "% of its timestamp bytes sent to other servers")):
        with plots.figure(run.path(f"{png}.png"), title, "server", ylabel) as ax:
            for i, (label, t) in enumerate(variants):
                ax.bar(t.server + i * width, t[column], width=width, label=label)
            numbers = np.arange(1, p.servers + 1)
            ax.set_xticks(numbers + 0.4 - width / 2, [str(s) for s in numbers])
    subs = table[table.sweep == "subscriptions"]
    for what, column, label in (("latency", "mean_latency_ms", "mean latency (ms)"),
                                ("throughput", "throughput_per_s", "timestamps/s")):
        with plots.figure(run.path(f"{what}_vs_subscriptions.png"),
                           f"{what.capitalize()} at {p.subscription_rate:g} requests/s",
                           "total subscriptions", label) as ax:
            for name, t in _variants(p, subs):
                ax.plot(t.subscriptions, t[column], marker="o", label=name)
            plots.log_x(ax, subs.subscriptions)


def _summary(p: TnoSequencerParams, table: pd.DataFrame, bw: pd.DataFrame, run: Run) -> None:
    cols = ["popularity", "chains", "sweep", "topics_per_client", "subscriptions", "rate_per_s", "service_ms",
            "events", "mean_latency_ms", "p99_latency_ms", "throughput_per_s", "capacity_per_s"]
    chain = ["mean_tms_visited", "mean_timestamp_stages", "mean_servers_visited", "mean_timestamp_entries",
             "remote_subscription_share"]
    shape = table[table.topics_per_client == p.topics_per_client].groupby(["popularity", "chains"],
                                                                          sort=False)[chain]
    shape = shape.first().reset_index()
    shape.insert(2, "law", [describe(p.topics, m)["law"] for m in shape.popularity])
    if p.deployment == "geo":
        where = (f"Geo-distributed deployment: {p.servers} sites with one server each, TMs of topics in "
                 f"contiguous id ranges of about {p.topics / p.servers:g}, {p.clients} clients in "
                 "equal blocks per site; each site ranks its own topics first and the other sites' after "
                 "them (interleaved), and its clients publish and subscribe by the popularity law over that "
                 "ranking")
    else:
        where = (f"Global deployment: one popularity over topic ids, {p.servers} servers hosting contiguous "
                 f"ranges of the precedence order, servers and clients over {p.regions} regions at random")
    run.path("summary.md").write_text(
        f"# tno_sequencer\n\n{where}. Precedence {p.precedence}; chain rules {', '.join(p.chains)} (etree: "
        "up the elimination tree; interval: every TM between in precedence order; literal: group members "
        f"only); {p.topics_per_client} topics per client "
        f"(rate and service sweeps); short links 10 ± 2 ms inside a site/region, long 100 ± 10 ms between; "
        f"{p.duration_s:g} s of publications per point, {'causal' if p.causal else 'TNO'} sequencing groups, "
        f"seed {p.seed}. Latency: request sent by the client until the finished timestamp is back at the "
        "client. Throughput: completions per second over the second half of the run; capacity: the rate at "
        "which the busiest TM (stages x service time + messages x message time per event) or the busiest "
        f"server (the same over its TMs, over its {p.server_cores} cores) is always busy, predicted from "
        "the chains alone (capacity.csv names the bottleneck). remote_subscription_share: subscriptions "
        "to topics whose TM is in another site/region.\n\n## Chains (expected per event)\n\n"
        + plots.markdown_table(shape, ".2f") +
        "\n\n## Latency and throughput\n\n" + plots.markdown_table(table[cols], ".1f") +
        f"\n\n## Bandwidth per server at {max(p.rates):g} events/s\n\noutgoing_percent = bytes of "
        "timestamps forwarded to other servers / bytes of all timestamp requests the server received x 100; "
        "bandwidth_share = the server's part of all inter-server bytes.\n\n"
        + plots.markdown_table(bw, ".3f") + "\n")
