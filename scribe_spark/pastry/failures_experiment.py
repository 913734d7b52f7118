"""Experiment pastry_failures (SPEC P3): lookups before failures, after failures, after repair.

The same lookups (random keys from random surviving nodes) are routed three times: on the
converged overlay, after `fail_fraction` of the nodes fail silently (survivors skip the dead
entries they find, no repair), and after leaf-set and routing-table repair. A lookup is
correct when it ends at the numerically closest node that is alive in that phase, found by
brute force over the sorted ids.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from scribe_spark import ids, report
from scribe_spark.cli import Run
from scribe_spark.config import PastryFailuresParams
from scribe_spark.pastry import failures as fl, overlay as ov
from scribe_spark.pastry.hops import make_ring, shared_network
from scribe_spark.session import spark_session

PHASES = ("before", "after_failure", "after_repair")


def run(p: PastryFailuresParams, run: Run) -> None:
    """Route, fail, route, repair, route; write failures.csv, a plot and the summary."""
    spark = spark_session(run.name)
    routers, matrix = shared_network(p, p.seed)
    ring = make_ring(p.nodes, p, np.random.default_rng([p.seed, p.nodes]), routers, matrix)
    rng = np.random.default_rng([p.seed, p.nodes, 5])
    dead = np.zeros(p.nodes, dtype=bool)
    dead[rng.choice(p.nodes, int(round(p.fail_fraction * p.nodes)), replace=False)] = True
    src = rng.choice(np.flatnonzero(~dead), p.lookups)
    khi, klo = ids.random_ids(p.lookups, rng)
    t0 = time.time()
    overlay = ov.build_overlay(spark, ring, "proximity", seed=p.seed)
    run.log(f"converged state for {p.nodes} nodes ({time.time() - t0:.1f}s); {int(dead.sum())} will fail")

    rows, counts = [], {}
    for phase in PHASES:
        t0 = time.time()
        if phase == "before":
            current, alive = overlay, np.ones(p.nodes, dtype=bool)
        elif phase == "after_failure":
            current, alive = fl.without_dead(overlay, dead), ~dead
        else:
            alive = ~dead
            current, counts = fl.repair(overlay, dead, log=lambda m: run.log(f"repair: {m}"))
        routed = fl.checked_lookups(current, src, khi, klo, alive, log=lambda m: run.log(f"{phase}: {m}"))
        correct = routed.correct.to_numpy()
        per_failed = (counts["leaf_messages"] + counts["table_messages"]) / max(1, dead.sum()) if counts else 0.0
        rows.append({"phase": phase, "lookups": len(routed), "mean_hops": routed.hops.mean(),
                     "correct_fraction": correct.mean(), "repair_messages_per_failed_node": per_failed,
                     "rare_case_hops": int(routed.rare.sum()), "max_hops": int(routed.hops.max()),
                     "mean_distance": routed.distance.mean()})
        run.log(f"{phase}: mean hops {rows[-1]['mean_hops']:.3f}, correct {correct.mean():.4%}, "
                f"{rows[-1]['rare_case_hops']} rare-case hops ({time.time() - t0:.1f}s)")
    table = pd.DataFrame(rows)
    report.write_csv(table, run.path("failures.csv"))
    repair = pd.DataFrame([{"failed_nodes": int(dead.sum()), **counts}])
    report.write_csv(repair, run.path("repair.csv"))
    with report.figure(run.path("failures.png"), f"{p.nodes} nodes, {p.fail_fraction:.0%} fail",
                       "phase", "mean hops") as ax:
        bars = ax.bar(range(len(table)), table.mean_hops)
        for bar, frac in zip(bars, table.correct_fraction):
            ax.annotate(f"{frac:.2%} correct", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(table)), table.phase)
    run.path("summary.md").write_text(
        f"# pastry_failures\n\n{p.nodes} nodes ({p.proximity} model), b={p.b}, |L|={p.leaf_set}, "
        f"|M|={p.neighborhood}, {int(dead.sum())} nodes ({p.fail_fraction:.0%}) fail silently; {p.lookups:,} "
        f"lookups of random keys from random surviving nodes, the same in every phase; seed {p.seed}. Correct = "
        "delivered to the numerically closest live node (brute force). Without repair, nodes skip the dead "
        "entries they find (timeouts are not counted as hops). Repair: leaf sets from the farthest live leaf on "
        "each short side (supersteps until no node is short), then every dead routing-table entry (r, c) by asking "
        "row r's live entries, nearest first, until one names a live node, then row r + 1; 2 messages per "
        "question. Entries whose prefix class has no live node stay empty.\n\n"
        + report.markdown_table(table, ".4f") + "\n\n## Repair\n\n" + report.markdown_table(repair, ".0f") + "\n")
