"""Experiment pastry_failures (P3): lookups before failures, after failures, after repair.

The same lookups (random keys from random surviving nodes) are routed on the converged
overlay; after `fail_fraction` of the nodes fail silently, with no repair (a node that
forwards to a dead node times out and picks again); and after repair: leaf sets at once, then
routing tables either lazily (entries repaired when the lookups find them dead, as in Pastry)
or eagerly (every dead entry before routing). With lazy repair the lookups are routed
`passes` times in a row, each on the state the previous pass left, to show the repair
settling. A lookup is correct when it ends at the numerically closest node that is alive in
that phase, found by brute force over the sorted ids.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from scribe_spark import ids
from scribe_spark import report as plots
from scribe_spark.config import PastryFailuresParams
from scribe_spark.experiments.outputs import Outcome
from scribe_spark.experiments.run import Run
from scribe_spark.pastry import failures as fl
from scribe_spark.pastry import overlay as ov
from scribe_spark.reference import closest
from scribe_spark.spark.session import spark_session
from scribe_spark.streams import Purpose, stream
from scribe_spark.workloads.network import make_ring, shared_network

TABLE_COUNTS = ("table_holes", "table_met", "table_repaired", "table_messages")


def _rpcs_per_failed(messages: int, failed: int) -> float:
    """Repair RPCs (a request and its reply) per failed node."""
    return messages / fl.MESSAGES_PER_RPC / max(1, failed)


def _row(phase: str, routed: pd.DataFrame, messages: int, failed: int) -> dict:
    return {"phase": phase, "lookups": len(routed), "mean_hops": routed.hops.mean(),
            "correct_fraction": routed.correct.mean(),
            "repair_messages_per_failed_node": messages / max(1, failed),
            "repair_rpcs_per_failed_node": _rpcs_per_failed(messages, failed),
            "timeouts_per_lookup": routed.timeouts.mean(), "rare_case_hops": int(routed.rare.sum()),
            "max_hops": int(routed.hops.max()), "mean_distance": routed.distance.mean()}


def simulate(p: PastryFailuresParams, run: Run) -> Outcome:
    """Route the lookups before the failure, after it without repair, and after repair."""
    spark = spark_session(run.name)
    routers, matrix = shared_network(p, p.seed)
    ring = make_ring(p.nodes, p, p.seed, routers, matrix, spark=spark)
    rng = stream(p.seed, Purpose.FAILURES, p.nodes)
    dead = np.zeros(p.nodes, dtype=bool)
    dead[rng.choice(p.nodes, int(round(p.fail_fraction * p.nodes)), replace=False)] = True
    failed = int(dead.sum())
    src = rng.choice(np.flatnonzero(~dead), p.lookups)
    khi, klo = ids.random_ids(p.lookups, rng)
    t0 = time.time()
    overlay = ov.build_overlay(spark, ring, "proximity", seed=p.seed)
    run.log(f"converged state for {p.nodes} nodes ({time.time() - t0:.1f}s); {failed} will fail")

    def lookups(phase: str, current: ov.Overlay, alive: np.ndarray, **route_args) -> pd.DataFrame:
        t0 = time.time()
        routed = closest.checked_lookups(current, src, khi, klo, alive, **route_args)
        run.log(f"{phase}: mean hops {routed.hops.mean():.3f}, correct {routed.correct.mean():.4%}, "
                f"{routed.timeouts.mean():.3f} timeouts per lookup, {int(routed.rare.sum())} rare-case hops "
                f"({time.time() - t0:.1f}s)")
        return routed

    rows = [_row("before", lookups("before", overlay, np.ones(p.nodes, dtype=bool)), 0, failed),
            _row("after_failure", lookups("after_failure", overlay, ~dead, dead=dead), 0, failed)]
    if p.table_repair == "eager":
        counts, passes = _eager(overlay, dead, rows, lookups), []
    else:
        counts, passes = _lazy(overlay, dead, rows, lookups, p.passes)
    tables = {"failures": pd.DataFrame(rows), "repair": _repair_table(p, counts, failed)}
    if passes:
        tables["lazy_passes"] = pd.DataFrame(passes)
    return Outcome(tables, {"failed": failed})


def _eager(overlay: ov.Overlay, dead: np.ndarray, rows: list[dict], lookups) -> dict:
    """Repair every dead entry, then route once; return the repair's counts."""
    failed = int(dead.sum())
    current, counts = fl.repair(overlay, dead)
    counts["table_met"] = counts["table_holes"]
    routed = lookups("after_repair", current, ~dead, dead=dead)
    rows.append(_row("after_repair", routed, counts["leaf_messages"] + counts["table_messages"], failed))
    return counts


def _lazy(overlay: ov.Overlay, dead: np.ndarray, rows: list[dict], lookups, passes: int) -> tuple[dict, list]:
    """Route `passes` times, repairing the entries the routes find dead; return the counts and each pass."""
    failed = int(dead.sum())
    lazy = fl.LazyRepair(overlay, dead)
    out = []
    for k in range(1, passes + 1):
        before = {c: lazy.counts[c] for c in TABLE_COUNTS[1:]}
        routed = lookups(f"after_repair pass {k}", lazy.overlay, ~dead, dead=dead, repair=lazy)
        step = {c: lazy.counts[c] - before[c] for c in before}
        out.append({"pass": k, "mean_hops": routed.hops.mean(), "correct_fraction": routed.correct.mean(),
                    "timeouts_per_lookup": routed.timeouts.mean(), "entries_found_dead": step["table_met"],
                    "entries_replaced": step["table_repaired"], "table_messages": step["table_messages"],
                    "table_rpcs_per_failed_node": _rpcs_per_failed(step["table_messages"], failed)})
        if k == 1:
            rows.append(_row("after_repair", routed,
                             lazy.counts["leaf_messages"] + lazy.counts["table_messages"], failed))
    return lazy.counts, out


def _repair_table(p: PastryFailuresParams, counts: dict, failed: int) -> pd.DataFrame:
    rpcs = {f"{part}_rpcs_per_failed_node": _rpcs_per_failed(counts[f"{part}_messages"], failed)
            for part in ("leaf", "table")}
    return pd.DataFrame([{"failed_nodes": failed, "table_repair": p.table_repair,
                          "leaf_messages": counts["leaf_messages"], **{c: counts[c] for c in TABLE_COUNTS},
                          **rpcs, "rpcs_per_failed_node": sum(rpcs.values())}])


def report(outcome: Outcome, p: PastryFailuresParams, run: Run) -> None:
    """Plot mean hops per phase with correctness and timeouts; write the summary."""
    table = outcome.tables["failures"]
    with plots.figure(run.path("failures.png"),
                      f"{p.nodes} nodes, {100 * p.fail_fraction:g}% fail, {p.table_repair} "
                      "routing-table repair", "phase", "mean hops") as ax:
        bars = ax.bar(range(len(table)), table.mean_hops)
        for bar, frac, tmo in zip(bars, table.correct_fraction, table.timeouts_per_lookup):
            ax.annotate(f"{frac:.2%} correct\n{tmo:.3f} timeouts/lookup",
                        (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                        fontsize=8)
        ax.set_xticks(range(len(table)), table.phase)
        ax.set_ylim(0, 1.3 * max(table.mean_hops.max(), 1e-9))   # room for the labels under the title
    _summary(outcome, p, run)


def _summary(outcome: Outcome, p: PastryFailuresParams, run: Run) -> None:
    table, repair = outcome.tables["failures"], outcome.tables["repair"]
    passes = outcome.tables.get("lazy_passes")
    how = ("lazily: after each routing superstep, every entry a lookup found dead is repaired before the "
           f"next superstep; `after_repair` is the first of {p.passes} passes of the same lookups "
           "(lazy_passes.csv)"
           if p.table_repair == "lazy" else "eagerly: every dead entry, before the lookups")
    run.path("summary.md").write_text(
        f"# pastry_failures\n\n{p.nodes} nodes ({p.proximity} model), b={p.b}, |L|={p.leaf_set}, "
        f"|M|={p.neighborhood}, {outcome.notes['failed']} nodes ({100 * p.fail_fraction:g}%) fail silently; "
        f"{p.lookups:,} lookups of random keys from random surviving nodes, the same in every phase; "
        f"seed {p.seed}. Correct = "
        "delivered to the numerically closest live node (brute force). A node that forwards to a dead node "
        "times out (counted in timeouts_per_lookup, not in hops), forgets it and applies the routing rule "
        "again. Repair: leaf sets from the farthest live leaf on each short side (supersteps until no node "
        f"is short); routing-table entries {how}. A dead entry (r, c) is repaired by asking row r's live "
        "entries, nearest first, until one names a live node, then row r + 1's; each question is one RPC (a "
        "request and its reply, 2 messages; the Pastry paper counts RPCs); repair.csv counts all passes; "
        "entries with no live candidate become "
        "empty.\n\n" + plots.markdown_table(table, ".4f") + "\n\n## Repair\n\n"
        + plots.markdown_table(repair, ".2f") + "\n"
        + ("\n## Lazy repair, pass by pass\n\n" + plots.markdown_table(passes, ".4f") + "\n"
           if passes is not None else ""))
