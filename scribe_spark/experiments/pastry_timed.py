"""Experiment pastry_timed: Pastry in simulated time while nodes crash, bin by bin.

`nodes` members start converged. Each draws what remains of a session under way from `session`'s
law (mean `mean_session_s`); a session that ends before `duration_s` ends in a graceful leave (a
share `leave_share` of them: the node tells its leaf set first) or a crash, and the node stays down
(nobody joins or recovers yet). Leaf-set members probe each other every `keepalive_s`; a
member unanswered `failure_timeout_s` after a probe is declared failed and the leaf set repaired;
lookups of random keys from random nodes are issued as a Poisson process of
`lookups_per_node_s` per node and routed hop by hop at the link delays, a forwarder that sends to
a dead node learning it `rto_ms` later (`pastry.timed`, docs/model.md, "Simulated time"). With
`check = true` the sequential reference simulation runs on the same inputs and the run stops if
any lookup, detection, repair or message count differs.

Tables: `timeline.csv` (one row per bin of `bin_s`: members, lookups by outcome, latency, hops,
timeouts, maintenance messages per node and second) and `repairs.csv` (one row per crash: when
it was noticed and when the leaf sets that held it were repaired).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from scribe_spark import ids
from scribe_spark import report as plots
from scribe_spark.config import PastryTimedParams
from scribe_spark.experiments.outputs import Outcome
from scribe_spark.experiments.run import Run
from scribe_spark.pastry import timed
from scribe_spark.pastry.kernels import Ring
from scribe_spark.pastry.overlay import build_overlay
from scribe_spark.sessions import SessionLaw
from scribe_spark.spark.session import spark_session
from scribe_spark.streams import Purpose, stream
from scribe_spark.workloads.network import make_ring, shared_network

KINDS = {"keepalive": ("probe", "probe_reply"), "leaf_repair": ("leaf_request", "leaf_reply"),
         "leave": ("leave",)}
DELAYS = ("detected_after_s", "leaf_detected_after_s", "leaf_sets_repaired_after_s")   # repairs.csv


@dataclass(frozen=True)
class Departures:
    """Who goes when (ms): the crashes and the graceful leaves."""

    crashes: dict[int, float]
    leaves: dict[int, float]

    @property
    def times(self) -> dict[int, float]:
        """Every departure, crash or leave."""
        return {**self.crashes, **self.leaves}


def timers(p: PastryTimedParams) -> timed.Timers:
    """The protocol's timers, in ms."""
    return timed.Timers(keepalive_ms=1000.0 * p.keepalive_s, failure_timeout_ms=1000.0 * p.failure_timeout_s,
                        rto_ms=p.rto_ms, proc_ms=p.hop_ms, lookup_timeout_ms=1000.0 * p.lookup_timeout_s)


def workload(p: PastryTimedParams, rng: np.random.Generator) -> tuple[Departures, pd.DataFrame]:
    """The departures and the lookups (t_issue, src, key_hi, key_lo), from the seed."""
    shape = {"weibull": p.weibull_shape, "pareto": p.pareto_shape}.get(p.session, 1.0)
    ends = 1000.0 * SessionLaw(p.session, p.mean_session_s, shape).residuals(rng, p.nodes)
    until = 1000.0 * p.duration_s
    going = np.flatnonzero(ends < until)
    graceful = stream(p.seed, Purpose.LEAVES, p.nodes).random(len(going)) < p.leave_share
    gone = Departures({int(v): float(ends[v]) for v in going[~graceful]},
                      {int(v): float(ends[v]) for v in going[graceful]})
    count = int(rng.poisson(p.lookups_per_node_s * p.nodes * p.duration_s))
    khi, klo = ids.random_ids(count, rng)
    lookups = pd.DataFrame({"t_issue": np.sort(rng.uniform(0.0, until, count)),
                            "src": rng.integers(0, p.nodes, count), "key_hi": khi, "key_lo": klo})
    return gone, lookups


def simulate(p: PastryTimedParams, run: Run) -> Outcome:
    """Run the timed protocol; bin its lookups and messages; time each crash's detection and repair."""
    spark = spark_session(run.name)
    routers, matrix = shared_network(p, p.seed)
    ring = make_ring(p.nodes, p, stream(p.seed, None, p.nodes), routers, matrix)
    gone, lookups = workload(p, stream(p.seed, Purpose.CHURN, p.nodes))
    t0 = time.time()
    overlay = build_overlay(spark, ring, seed=p.seed)
    run.log(f"converged state for {p.nodes} nodes ({time.time() - t0:.1f}s); within {p.duration_s:g} s "
            f"{len(gone.crashes)} crash and {len(gone.leaves)} leave; {len(lookups):,} lookups")
    got = timed.simulate(overlay, gone.crashes, lookups, timers(p), 1000.0 * p.duration_s, seed=p.seed,
                         bin_ms=1000.0 * p.bin_s, leaves=gone.leaves)
    overlay.unpersist()
    run.log(f"simulated in {got.passes} passes ({time.time() - t0:.1f}s): {len(got.detections):,} "
            f"detections, {len(got.repairs):,} leaf sets repaired")
    if p.check:
        _check(p, run, ring, gone, lookups, got)
    tables = {"timeline": timeline(p, ring, gone, lookups, got), "repairs": repairs(gone, got)}
    return Outcome(tables, {"crashes": len(gone.crashes), "leaves": len(gone.leaves),
                            "lookups": len(lookups), "passes": got.passes,
                            "messages": dict(got.messages), "checked": p.check})


def _check(p: PastryTimedParams, run: Run, ring: Ring, gone: Departures, lookups: pd.DataFrame,
           got: timed.TimedRun) -> None:
    """Run the sequential reference on the same inputs; raise if anything differs."""
    from scribe_spark.reference.timed_pastry import TimedParams, TimedPastry
    t0 = time.time()
    tm = timers(p)

    def link(u: int, v: int) -> float:
        return float(ring.prox.dist([u], [v])[0])
    phase = timed.keepalive_phase(np.arange(ring.n), p.seed, tm.keepalive_ms)
    keys = (lookups[c].to_numpy(np.uint64).tolist() for c in ("key_hi", "key_lo"))
    asked = list(zip(lookups.t_issue.tolist(), lookups.src.tolist(), *keys))
    params = TimedParams(keepalive_ms=tm.keepalive_ms, failure_timeout_ms=tm.failure_timeout_ms,
                         rto_ms=tm.rto_ms, proc_ms=tm.proc_ms, lookup_timeout_ms=tm.lookup_timeout_ms)
    ref = TimedPastry(ring, link, params, phase).run(gone.crashes, asked, 1000.0 * p.duration_s, gone.leaves)
    differ = _differences(got, ref, 1000.0 * p.bin_s)
    if differ:
        raise RuntimeError(f"the sequential reference differs from the Spark run in: {', '.join(differ)}")
    run.log(f"the sequential reference gives the same lookups, detections, repairs and messages "
            f"({time.time() - t0:.1f}s)")


def _differences(got: timed.TimedRun, ref, width: float) -> list[str]:
    """What differs between the Spark run and the reference's result (empty: nothing)."""
    want = pd.DataFrame(ref.lookups)
    differ = [c for c in ("outcome", "dest", "hops", "timeouts")
              if got.lookups[c].tolist() != want[c].tolist()]
    if not np.array_equal(got.lookups.latency_ms.to_numpy(float), want.latency_ms.to_numpy(float),
                          equal_nan=True):
        differ.append("latency")
    pairs = {"detections": (zip(got.detections.failed, got.detections.detector, got.detections.t),
                            ((y, x, t) for y, x, _c, t in ref.detections)),
             "repair requests": (zip(*(got.repair_starts[c] for c in ("node", "failed", "asked", "t"))),
                                 ref.repair_starts),
             "repairs": (zip(got.repairs.node, got.repairs.t), ref.repairs)}
    differ += [name for name, (a, b) in pairs.items() if sorted(a) != sorted(b)]
    if got.messages != ref.messages:
        differ.append("message counts")
    n = len(got.maintenance)
    for kind in timed.MAINTENANCE:
        at = np.minimum(np.asarray(ref.sent_at.get(kind, []), np.float64) // width, n - 1).astype(int)
        if got.maintenance[kind].tolist() != np.bincount(at, minlength=n).tolist():
            differ.append(f"{kind} messages per bin")
    return differ


def timeline(p: PastryTimedParams, ring: Ring, gone: Departures, lookups: pd.DataFrame,
             got: timed.TimedRun) -> pd.DataFrame:
    """One row per bin: members, the lookups issued in it by outcome, and the messages sent in it."""
    width, until = 1000.0 * p.bin_s, 1000.0 * p.duration_s
    starts = got.maintenance.t_ms.to_numpy(np.float64)
    ends = np.minimum(starts + width, until)
    end = timed.Crashes.of(gone.times).at(np.arange(ring.n))
    # node-seconds alive in each bin, for the rates per node and second
    alive_s = np.array([(np.clip(end, a, b) - a).sum() for a, b in zip(starts, ends)]) / 1000.0
    rows = pd.DataFrame({"time_s": starts / 1000.0, "members": [int((end > b).sum()) for b in ends]})
    for name, times in (("crashes", gone.crashes), ("leaves", gone.leaves)):
        at = np.fromiter(times.values(), np.float64, len(times)) // width
        rows[name] = np.bincount(np.minimum(at, len(starts) - 1).astype(int), minlength=len(starts))
    rows = rows.join(_lookup_bins(ring, lookups, got, width, len(starts), p.hop_ms))
    for name, kinds in KINDS.items():
        rows[f"{name}_msgs_per_node_s"] = got.maintenance[list(kinds)].sum(axis=1).to_numpy() / alive_s
    rows["maintenance_msgs_per_node_s"] = sum(rows[f"{name}_msgs_per_node_s"] for name in KINDS)
    return rows


def _lookup_bins(ring: Ring, lookups: pd.DataFrame, got: timed.TimedRun, width: float, n: int,
                 hop_ms: float) -> pd.DataFrame:
    """Per bin of issue time: lookups issued, shares by outcome, latency, delay penalty, hops, timeouts."""
    done = got.lookups.assign(src=lookups.src.to_numpy(np.int64),
                              bin=np.minimum((lookups.t_issue.to_numpy() // width).astype(int), n - 1))
    done = done[done.outcome != "not_issued"]
    delivered = done[done.outcome.isin(("correct", "wrong"))]
    moved = delivered[delivered.dest != delivered.src]
    direct = ring.prox.dist(moved.src.to_numpy(np.int64), moved.dest.to_numpy(np.int64)) + hop_ms
    moved = moved.assign(rdp=moved.latency_ms.to_numpy(float) / direct)
    by, lat = done.groupby("bin"), delivered.groupby("bin").latency_ms
    out = pd.DataFrame({
        "lookups": by.size(),
        **{f"lookup_{name}": by.outcome.agg(lambda o, k=kind: float((o == k).mean()))
           for name, kind in (("success", "correct"), ("wrong", "wrong"), ("lost", "lost"))},
        "lookup_latency_ms_mean": lat.mean(), "lookup_latency_ms_p50": lat.median(),
        "lookup_latency_ms_p99": lat.quantile(0.99), "rdp_mean": moved.groupby("bin").rdp.mean(),
        "hops_mean": delivered.groupby("bin").hops.mean(), "timeouts_per_lookup": by.timeouts.mean()})
    out = out.reindex(np.arange(n))
    out["lookups"] = out.lookups.fillna(0).astype(np.int64)
    return out


def repairs(gone: Departures, got: timed.TimedRun) -> pd.DataFrame:
    """One row per departure: who noticed it and when, and when the leaf sets that held it were whole
    again."""
    left = pd.Series(gone.times, name="t_left", dtype=np.float64).rename_axis("node").sort_values()
    seen = got.detections.groupby("failed").t.agg(["size", "min"])
    # the leaf-set holders that declared it, each repaired by the first reply it merges after that
    held = got.repair_starts.sort_values("t").drop_duplicates(["failed", "node"])
    fixed = got.repairs.rename(columns={"t": "t_fixed"}).sort_values("t_fixed")
    held = pd.merge_asof(held, fixed, left_on="t", right_on="t_fixed", by="node", direction="forward")
    leaf = held.groupby("failed").agg(n=("node", "size"), last=("t", "max"),
                                      fixed=("t_fixed", lambda v: v.max(skipna=False)))
    out = pd.DataFrame({"node": left.index.to_numpy(np.int64), "left_s": left.to_numpy() / 1000.0,
                        "graceful": [v in gone.leaves for v in left.index]})
    t0 = left.to_numpy()
    out["detectors"] = seen["size"].reindex(left.index, fill_value=0).to_numpy()
    out["leaf_detectors"] = leaf.n.reindex(left.index, fill_value=0).to_numpy()
    out["detected_after_s"] = (seen["min"].reindex(left.index).to_numpy() - t0) / 1000.0
    out["leaf_detected_after_s"] = (leaf["last"].reindex(left.index).to_numpy() - t0) / 1000.0
    out["leaf_sets_repaired_after_s"] = (leaf.fixed.reindex(left.index).to_numpy() - t0) / 1000.0
    return out


def report(outcome: Outcome, p: PastryTimedParams, run: Run) -> None:
    """Plot lookups, latency and maintenance over time, and the detection and repair delays; summarise."""
    t, rep = outcome.tables["timeline"], outcome.tables["repairs"]
    title = f"{p.nodes} nodes, mean session {p.mean_session_s:g} s, keep-alive {p.keepalive_s:g} s"
    with plots.figure(run.path("lookups.png"), title, "time (s)", "share of the lookups issued") as ax:
        for col, style in (("lookup_success", "-"), ("lookup_wrong", "--"), ("lookup_lost", ":")):
            ax.plot(t.time_s, t[col], style, label=col.replace("_", " "))
    with plots.figure(run.path("latency.png"), title, "time (s)", "lookup latency (ms)") as ax:
        for col, style in (("lookup_latency_ms_mean", "-"), ("lookup_latency_ms_p50", "--"),
                           ("lookup_latency_ms_p99", ":")):
            ax.plot(t.time_s, t[col], style, label=col.rsplit("_", 1)[1])
    with plots.figure(run.path("maintenance.png"), title, "time (s)", "messages per node per second") as ax:
        for name in (*KINDS, "maintenance"):
            ax.plot(t.time_s, t[f"{name}_msgs_per_node_s"], label=name.replace("_", " "))
    with plots.figure(run.path("repairs.png"), title, "after the departure (s)", "share") as ax:
        for how, rows in (("crashes", rep[~rep.graceful]), ("leaves", rep[rep.graceful])):
            for col in DELAYS if len(rows) else ():
                plots.cdf(ax, rows[col].dropna(), label=f"{how}: {col.removesuffix('_s').replace('_', ' ')}")
    _summary(outcome, p, run)


def _delays(rep: pd.DataFrame) -> pd.DataFrame:
    """Count, mean, median and maximum of each delay of repairs.csv, for crashes and for leaves."""
    out = []
    for how, rows in (("crash", rep[~rep.graceful]), ("leave", rep[rep.graceful])):
        stats = {c: (lambda v: [v.count(), v.mean(), v.median(), v.max()])(rows[c].dropna()) for c in DELAYS}
        out.append(pd.DataFrame(stats).assign(statistic=["count", "mean", "median", "max"], departure=how))
    return pd.concat(out)[["departure", "statistic", *DELAYS]]


def _summary(outcome: Outcome, p: PastryTimedParams, run: Run) -> None:
    t, rep, notes = outcome.tables["timeline"], outcome.tables["repairs"], outcome.notes
    shape = {"weibull": f", shape {p.weibull_shape:g}",
             "pareto": f", shape {p.pareto_shape:g}"}.get(p.session, "")
    checked = ("The sequential reference simulation gave the same lookups, detections, repairs and message "
               "counts." if notes["checked"] else
               "Not checked against the sequential reference (check = false).")
    run.path("summary.md").write_text(
        f"# pastry_timed\n\n{p.nodes} nodes ({p.proximity} model, b={p.b}, |L|={p.leaf_set}) for "
        f"{p.duration_s:g} simulated seconds; {p.session} sessions of mean {p.mean_session_s:g} s{shape}: "
        f"{notes['crashes']} nodes crash and {notes['leaves']} leave gracefully (share {p.leave_share:g}), "
        "and stay down (no joins or recoveries). Keep-alive every "
        f"{p.keepalive_s:g} s, failure timeout {p.failure_timeout_s:g} s, retransmission timeout "
        f"{p.rto_ms:g} ms, {p.hop_ms:g} ms per hop; {notes['lookups']:,} lookups "
        f"({p.lookups_per_node_s:g} per node per second), lost after {p.lookup_timeout_s:g} s; "
        f"seed {p.seed}. "
        f"Fixed point reached in {notes['passes']} passes. {checked}\n\n"
        "Lookups are binned by issue time; success = delivered to the live node numerically closest to the "
        "key at delivery. Lookups still in flight at the end count in no share. Messages are binned by "
        "sending time; per node and second of node life.\n\n"
        f"Messages in all: {', '.join(f'{k} {v:,}' for k, v in sorted(notes['messages'].items()))}.\n\n"
        "## Departures: detection and leaf-set repair (s after the departure)\n\n"
        + plots.markdown_table(_delays(rep), ".3f")
        + "\n\n## Timeline\n\n" + plots.markdown_table(t, ".4f") + "\n")
