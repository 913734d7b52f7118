"""Experiment pastry_joins (the Pastry paper's routing-table quality): an overlay grown by joins.

`initial` nodes start converged; the others join in batches of `batch` concurrent joins
(`pastry/joins.py`: JOIN route, state from the route's nodes, announcements, leaf-set
exchange), once per second join phase in `improve` (`none`: the route alone; `rows`: each
newcomer asks its row-i nodes for their row i; `tables`: then every node it names for its
whole table). Each grown overlay is compared with the converged construction, whose entries
hold the proximity-best valid node: per routing-table row, the slots that are empty,
proximity-optimal and sub-optimal, and lookups against the brute-force closest node.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from scribe_spark import ids
from scribe_spark import report as plots
from scribe_spark.config import PastryJoinsParams
from scribe_spark.experiments.outputs import Outcome
from scribe_spark.experiments.run import Run
from scribe_spark.pastry import joins
from scribe_spark.pastry import overlay as ov
from scribe_spark.reference import closest, routing_tables
from scribe_spark.reference.routing_tables import QUALITY
from scribe_spark.spark.session import spark_session
from scribe_spark.streams import Purpose, stream
from scribe_spark.workloads.network import make_ring, shared_network

# message kinds counted by joins.join_batch, in the order the tables show them
KINDS = ("route", "transfer", "notify", "leaf_exchange", "row_exchange", "table_exchange")


def simulate(p: PastryJoinsParams, run: Run) -> Outcome:
    """Grow the overlay by joins once per second join phase and compare it with the converged one."""
    spark = spark_session(run.name)
    routers, matrix = shared_network(p, p.seed)
    ring = make_ring(p.nodes, p, p.seed, routers, matrix, spark=spark)
    rng = stream(p.seed, Purpose.LOOKUPS, p.nodes)
    src = rng.integers(0, ring.n, p.lookups)
    khi, klo = ids.random_ids(p.lookups, rng)
    t0 = time.time()
    converged = ov.build_overlay(spark, ring, "proximity", seed=p.seed)
    want = converged.state.toPandas().set_index("id").sort_index()
    base = closest.checked_lookups(converged, src, khi, klo, np.ones(ring.n, dtype=bool))
    converged.unpersist()
    run.log(f"converged overlay of {p.nodes} nodes: {base.correct.mean():.4%} of {p.lookups:,} lookups "
            f"correct, {base.hops.mean():.3f} mean hops ({time.time() - t0:.1f}s)")
    lookups = (src, khi, klo, base)
    results = [run.point(f"improve={v}", lambda v=v: _grown(spark, p, run, ring, want, lookups, v))
               for v in p.improve]
    quality = pd.concat([q for _, q, _ in results], ignore_index=True)
    slots = quality[list(QUALITY)].sum(axis=1)
    for q in QUALITY:
        quality[f"{q}_share"] = quality[q] / slots
    timings = pd.DataFrame({"improve": list(p.improve), "grow_s": [s for _, _, s in results]})
    return Outcome({"joins": pd.DataFrame([r for r, _, _ in results]), "join_quality": quality,
                    "timings": timings})


def _grown(spark, p: PastryJoinsParams, run: Run, ring, want: pd.DataFrame, lookups: tuple,
           improve: str) -> tuple[dict, pd.DataFrame, float]:
    """Grow the overlay with one second join phase: its row of joins.csv, its rows' quality, its seconds."""
    src, khi, klo, base = lookups
    t0 = time.time()
    order = stream(p.seed, Purpose.JOIN_ORDER, p.nodes)
    overlay, counts = joins.grow(spark, ring, p.initial, p.batch, order, improve)
    seconds = time.time() - t0
    routed = closest.checked_lookups(overlay, src, khi, klo, np.ones(ring.n, dtype=bool))
    got = overlay.state.toPandas().set_index("id").sort_index()
    overlay.unpersist()
    same_leaf = np.mean([set(np.asarray(a).tolist()) == set(np.asarray(b).tolist())
                         for a, b in zip(got.leaf, want.leaf)])
    cmp = routing_tables.compare_tables(ring, got, want)
    newcomers = p.nodes - p.initial
    row = {"improve": improve, "lookups": p.lookups, "correct_fraction": routed.correct.mean(),
           "mean_hops": routed.hops.mean(), "converged_mean_hops": base.hops.mean(),
           "leaf_sets_converged": same_leaf, "entries": cmp["entries"],
           "proximity_best_share": cmp["best_share"], "invalid_entries": cmp["invalid"],
           **{f"{k}_per_newcomer": counts.get(k, 0) / newcomers for k in KINDS}}
    quality = routing_tables.row_quality(ring, got, want)
    run.log(f"improve = {improve}: grown in {seconds:.1f}s; {row['correct_fraction']:.4%} of lookups "
            f"correct, {row['mean_hops']:.3f} mean hops; {row['proximity_best_share']:.1%} of entries "
            "proximity-best")
    return row, quality.assign(improve=improve)[["improve", "row", *QUALITY]], seconds


def report(outcome: Outcome, p: PastryJoinsParams, run: Run) -> None:
    """Plot each row's slot quality per second join phase; write the summary."""
    table, quality = outcome.tables["joins"], outcome.tables["join_quality"]
    _plot(quality, p, run.path("join_quality.png"))
    run.path("summary.md").write_text(
        f"# pastry_joins\n\n{p.nodes:,} nodes ({p.proximity} model), b={p.b}, |L|={p.leaf_set}, "
        f"|M|={p.neighborhood}, seed {p.seed}: {p.initial:,} start converged, the other "
        f"{p.nodes - p.initial:,} join in batches of {p.batch:,} concurrent joins, once per second join "
        f"phase ({', '.join(p.improve)}). Optimal = the entry is the converged construction's (the "
        f"proximity-best valid node), over the routing-table slots that construction fills. {p.lookups:,} "
        "lookups from random nodes to random keys, correct = delivered at the numerically closest node "
        "(brute force). Messages per newcomer: a request and a reply are two.\n\n"
        + plots.markdown_table(table, ".4f") + "\n\n## Per routing-table row\n\n"
        + plots.markdown_table(quality, ".4f") + "\n")


def _plot(quality: pd.DataFrame, p: PastryJoinsParams, path) -> None:
    """Per row, one stacked bar per second phase: shares of optimal, sub-optimal and empty slots."""
    phases = list(p.improve)
    width = 0.8 / len(phases)
    colors = {"optimal": "tab:green", "suboptimal": "tab:orange", "empty": "tab:gray"}
    with plots.figure(path, f"Routing-table quality after joins ({p.nodes:,} nodes)", "routing-table row",
                       "share of the slots the converged construction fills") as ax:
        for i, phase in enumerate(phases):
            q = quality[quality.improve == phase]
            x = q.row.to_numpy() + (i - (len(phases) - 1) / 2) * width
            bottom = np.zeros(len(q))
            for kind in ("optimal", "suboptimal", "empty"):
                ax.bar(x, q[f"{kind}_share"], width * 0.9, bottom=bottom, color=colors[kind],
                       edgecolor="black", linewidth=0.3, label=kind if i == 0 else None,
                       hatch=("", "//", "..")[i % 3])
                bottom = bottom + q[f"{kind}_share"].to_numpy()
        ax.set_xticks(sorted(quality.row.unique()))
        ax.set_ylim(0, 1.3)
        ax.legend(loc="upper left", ncol=3, fontsize=8)
        ax.text(0.99, 0.97, "bars left to right:\n" + ", ".join(phases), transform=ax.transAxes,
                ha="right", va="top", fontsize=8)
