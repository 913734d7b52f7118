"""Pastry in simulated time on Spark against the sequential discrete-event reference, event for event."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from scribe_spark import bsp
from scribe_spark.pastry import kernels, timed
from tests.helpers import ROOT, small_ring

TINY = ROOT / "conf" / "tiny" / "churn.toml"


@pytest.mark.slow
def test_the_job_equals_the_sequential_reference_and_bins_what_it_simulated(tiny):
    """The tiny run's own check passed: every lookup's outcome, node, hops, timeouts and latency, every
    detection, repair request and repair, and the messages by kind and by bin equal the sequential
    reference's (the job stops otherwise), with crashes, graceful leaves, returns and newcomers that join,
    and so did every copy of the Scribe events down the trees. Its timeouts fall on keep-alive ticks: the
    ties to order."""
    folder = tiny("churn")
    assert "The sequential reference simulation gave the same" in (folder / "summary.md").read_text()
    t, r = pd.read_csv(folder / "timeline.csv"), pd.read_csv(folder / "repairs.csv")
    assert t.time_s.tolist() == [0, 10, 20, 30, 40]
    gone = t.crashes + t.leaves
    came = t.returns.cumsum() + t.arrivals.cumsum()
    assert gone.sum() == len(r) > 3 and (t.members == 100 - gone.cumsum() + came).all()
    assert t.arrivals.sum() > 0 and (t.join_msgs_per_node_s > 0).any()   # newcomers joined
    # half the departed nodes come back: they ask their last leaf set, which answers, and announce themselves
    back = t.returns.sum()
    assert 0 < back == r.back_s.notna().sum() < len(r) and (r.back_s > r.left_s).sum() == back
    assert (t.rejoin_msgs_per_node_s > 0).any()
    assert r.graceful.any() and not r.graceful.all() and (t.leave_msgs_per_node_s > 0).any()
    assert (t.timeouts_per_lookup > 0).any() and r.leaf_sets_repaired_after_s.notna().sum() > 3
    assert (t.lookup_success + t.lookup_wrong + t.lookup_lost <= 1 + 1e-12).all()
    # before the first crash every node probes its 16 leaf-set members every 3 s, and each probe is answered
    assert t.keepalive_msgs_per_node_s.iat[0] == pytest.approx(2 * 16 / 3, rel=0.05)
    # every message is 51 B, a leaf-set reply (or rejoin reply) 1 + 16 handles of 22 B more, a table request
    # 2 B and a table reply 2 + 22 B more, a JOIN 22 B and its reply 1 + 32 handles more, a heartbeat 16 B
    extra = t.maintenance_bytes_per_node_s - 51 * t.maintenance_msgs_per_node_s
    bound = (353 * (t.leaf_repair_msgs_per_node_s + t.rejoin_msgs_per_node_s)
             + 24 * t.table_repair_msgs_per_node_s + 705 * t.join_msgs_per_node_s
             + 16 * t.heartbeat_msgs_per_node_s)
    low = 2 * t.table_repair_msgs_per_node_s + 16 * t.heartbeat_msgs_per_node_s
    assert (extra >= low - 1e-9).all() and (extra <= bound + 1e-9).all() and extra.max() > 0
    assert (extra[bound == 0].abs() < 1e-9).all() and (t.table_repair_msgs_per_node_s > 0).any()
    # a holder probes within a keep-alive period of a crash and declares it failure_timeout_s later; a
    # leave is declared as its notice arrives, within a link delay (at most 1,414 ms on the plane)
    crashed, left = r[~r.graceful], r[r.graceful]
    assert (crashed.detected_after_s.dropna() <= 3.0 + 3.0).all()
    assert (left.detected_after_s <= 1.415 + 0.001).all() and (left.leaf_detectors > 0).all()
    sweep = pd.read_csv(folder / "sweep.csv")
    assert len(sweep) == 1 and int(sweep.lookups.iat[0]) == t.lookups.sum()
    assert int(sweep.departures.iat[0]) == len(r) and (t.keepalive_s == 3.0).all()
    assert int(sweep.returns.iat[0]) == t.returns.sum()
    # Scribe events went down the trees of the start (the check compared every copy, heartbeat and heartbeat
    # timeout with the reference's): all reached their subscribers until a parent went, fewer after (the
    # trees are not repaired), each after a link at least; parents sent heartbeats all along, and the
    # children of the one that crashed noticed within the timeout (6 s) of its last message
    assert t.publications.sum() == int(sweep.publications.iat[0]) > 40
    ratio = t.event_delivery_ratio
    assert (ratio[:2] == 1).all() and (0.5 < ratio[2:]).all() and (ratio[2:] < 1).all()
    assert (t.event_latency_ms_mean > 1).all() and (t.heartbeat_msgs_per_node_s > 0).all()
    orphaned = r[r.orphans > 0]
    assert len(orphaned) == 1 and orphaned.orphans_noticed.iat[0] > 0
    assert 0 < orphaned.orphans_noticed_after_s.iat[0] <= 6.0 + 1000 * 2 ** 0.5 / 1000 + 0.001


def test_newcomers_arrive_at_the_rate_nodes_leave_for_good(tmp_path):
    """arrivals = steady: a Poisson process of rate nodes (1 - recover_share) / mean session per second; a
    point of a longer mean session keeps some of a shorter one's arrivals (common random numbers).
    Newcomers are numbered after the members, absent from the start, and counted as arrivals, not as
    returns or nodes down at the start; their later sessions end and come back as the others'."""
    from scribe_spark.cli.job import plan
    from scribe_spark.experiments import churn as pt
    p = plan("churn", ["--conf", str(TINY), "--out", str(tmp_path), "--set", "nodes=4000",
                              "--set", "duration_s=3600", "--set", "mean_session_s=[600, 1200]"]).params
    short, _ = pt.workload(p, 600.0)
    long_, _ = pt.workload(p, 1200.0)
    want = 4000 * 0.5 / 600 * 3600   # 12,000
    assert abs(len(short.arrivals) - want) < 4 * want ** 0.5
    assert abs(len(long_.arrivals) - want / 2) < 4 * (want / 2) ** 0.5
    assert set(long_.arrivals.tolist()) < set(short.arrivals.tolist())
    pool = pt.ring_size(p) - 4000
    assert pool >= len(short.arrivals) and (short.newcomers == 4000 + np.arange(pool)).all()
    assert set(short.newcomers.tolist()) <= set(short.absent.tolist())
    n = short.counts()
    assert n["arrivals"] == len(short.arrivals) and "absent" not in n
    assert n["returns"] == len(short.back) and np.isin(short.within.node, short.newcomers).sum() > 1000


def test_a_trace_gives_the_members_their_returns_and_the_newcomers(tmp_path):
    """session = trace: the nodes with a session under way at 0 are the members (numbered first), a node
    first seen later is a newcomer (absent from the start, joining at its first session's start), a node's
    later session a return; a node whose sessions are all before 0 is no node of the run. The trace must
    have `nodes` sessions under way at 0, and says who is up at the start and who joins."""
    from scribe_spark.cli.job import plan
    from scribe_spark.experiments import churn as pt
    from scribe_spark.knobs import ConfigError
    lines = ["node,start_s,end_s", "gone,-50,-10"] + [f"m{i:02d},-100,1000" for i in range(2, 40)]
    lines += ["m00,-100,5", "m00,8,30", "m01,-100,12", "n0,3,1000", "n1,9,20", "n1,25,26"]
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(lines) + "\n")
    args = ["--conf", str(TINY), "--out", str(tmp_path), "--set", "session=trace", "--set", f"trace={trace}",
            "--set", "arrivals=none"]
    p = plan("churn", [*args, "--set", "nodes=40"]).params
    gone, lookups = pt.workload(p, 0.0)
    assert pt.ring_size(p) == 42 and gone.newcomers.tolist() == [40, 41]
    rows = [(int(r.node), r.down, r.up) for r in gone.spans.itertuples()]
    assert rows == [(0, 5000.0, 8000.0), (0, 30000.0, np.inf), (1, 12000.0, np.inf), (40, -np.inf, 3000.0),
                    (41, -np.inf, 9000.0), (41, 20000.0, 25000.0), (41, 26000.0, np.inf)]
    n = gone.counts()
    assert n["crashes"] + n["leaves"] == 5 and (n["returns"], n["arrivals"]) == (2, 2) and "absent" not in n
    assert lookups.src.max() < 40
    assert pt.trace_mean_s(p) == round((40 + 38 * 1100 + 105 + 22 + 112 + 997 + 11 + 1) / 45, 3)
    for bad, reason in ((["--set", "nodes=41"], "key 'nodes': must equal the trace's sessions under way at "
                                                "time 0 (40)"),
                        (["--set", "nodes=40", "--set", "start=steady", "--set", "recover_share=1"],
                         "key 'start': must be all_up with a trace"),
                        (["--set", "nodes=40", "--set", "arrivals=steady"],
                         "key 'arrivals': must be none with a trace")):
        with pytest.raises(ConfigError, match=re.escape(reason)):
            plan("churn", [*args, *bad])


def test_every_sweep_point_draws_the_same_numbers(tmp_path):
    """Common random numbers: the same lookups at every point, first session ends scaled by the mean."""
    from scribe_spark.cli.job import plan
    from scribe_spark.experiments.churn import workload
    p = plan("churn", ["--conf", str(TINY), "--out", str(tmp_path)]).params
    (short, asked), (long, again) = workload(p, 600.0), workload(p, 1200.0)
    pd.testing.assert_frame_equal(asked, again)
    first = [g.spans.drop_duplicates("node").set_index("node") for g in (short, long)]   # first goings
    assert first[1].down.to_dict() == {v: 2 * t for v, t in first[0].down.items() if 2 * t < 50_000.0}
    assert len(first[1]) and (first[1].graceful == first[0].graceful[first[1].index]).all()   # the same way


def test_sessions_after_returns_alternate_even_when_too_short_to_tell(tmp_path):
    """With a return after every departure, each node's goings and returns alternate, each after the one
    before, even with Weibull sessions so short that some round to nothing beside their start."""
    from scribe_spark.cli.job import plan
    from scribe_spark.experiments.churn import workload
    from scribe_spark.sessions import outages
    p = plan("churn", ["--conf", str(TINY), "--out", str(tmp_path), "--set", "recover_share=1",
                              "--set", "session=weibull", "--set", "weibull_shape=0.1",
                              "--set", "mean_downtime_s=1", "--set", "duration_s=600"]).params
    gone, _ = workload(p, 30.0)
    assert len(outages(gone.crashes, gone.leaves, gone.returns)) == len(gone.spans)   # raises if not
    assert gone.spans.groupby("node").size().max() > 3


@pytest.mark.parametrize("warmup", [0.0, 20.0, 40.0])
def test_the_sweep_row_adds_up_the_timeline_bins_from_the_warmup_on(tmp_path, warmup):
    """sweep.csv's row of a point equals its timeline.csv bins from `warmup_s` on, added up: departures and
    lookups counted (returns: of those departures), the lookups' outcome shares weighted by their counts,
    and the node-seconds lived (`_lived` from the warm-up against the per-bin `_alive`), on a made-up run
    with lookups in every bin."""
    from scribe_spark.cli.job import plan
    from scribe_spark.experiments import churn as pt
    p = plan("churn", ["--conf", str(TINY), "--out", str(tmp_path), "--set", f"warmup_s={warmup}",
                              "--set", "recover_share=1"]).params
    ring = small_ring(100)
    gone, lookups = pt.workload(p, 60.0)
    rng = np.random.default_rng(5)
    n, bins = len(lookups), np.arange(0.0, 50_000.0, 10_000.0)
    outcome = rng.choice(["correct", "wrong", "lost", "not_issued"], n, p=[0.7, 0.1, 0.1, 0.1])
    done = pd.DataFrame({"lid": np.arange(n), "outcome": outcome, "dest": rng.integers(0, 100, n),
                         "t_done": lookups.t_issue + 50.0, "hops": rng.integers(0, 4, n),
                         "timeouts": rng.integers(0, 2, n), "latency_ms": rng.uniform(1.0, 900.0, n)})
    sent = pd.DataFrame({"t_ms": bins, **{k: rng.integers(0, 500, len(bins)) for k in timed.MAINTENANCE}})
    empty = pd.DataFrame()
    got = timed.TimedRun(done, empty, empty, empty, None, sent, 1, empty, empty)
    order = gone.spans.sort_values(["down", "node"], kind="stable")   # repairs.csv's rows
    rep = pd.DataFrame({"left_s": order.down.to_numpy() / 1000.0, "graceful": order.graceful.to_numpy(),
                        "detected_after_s": order.down.to_numpy() / 7e3,
                        "leaf_sets_repaired_after_s": order.node.to_numpy() / 10.0})
    row = pt.sweep_row(p, ring, gone, lookups, got, rep)
    line = pt.timeline(p, ring, gone, lookups, got)
    after = line[line.time_s >= warmup]
    assert len(after) == 5 - int(warmup // 10) and after.lookups.sum() > 100
    assert row["departures"] == (after.crashes + after.leaves).sum() > 0
    late = gone.spans.down // 10_000 >= int(warmup // 10)
    assert row["returns"] == (late & np.isfinite(gone.spans.up)).sum() > 0   # of those departures
    assert row["lookups"] == after.lookups.sum()
    for share in ("lookup_success", "lookup_wrong", "lookup_lost"):
        assert row[share] == pytest.approx((after[share] * after.lookups).sum() / after.lookups.sum())
    alive, _ = pt._alive(100, gone, bins, np.minimum(bins + 10_000.0, 50_000.0))
    lived = pt._lived(100, gone, 50_000.0, 1000.0 * warmup)
    assert lived == pytest.approx(alive[int(warmup // 10):].sum(), rel=1e-12) and lived < 100 * (50 - warmup)
    total = sum(sent[k].to_numpy()[int(warmup // 10):].sum() for k in timed.MAINTENANCE)
    assert row["maintenance_msgs_per_node_s"] == pytest.approx(total / lived)
    size = sum(sent[k].to_numpy()[int(warmup // 10):].sum() * pt.message_bytes(k, p.leaf_set)
               for k in timed.MAINTENANCE)
    assert row["maintenance_bytes_per_node_s"] == pytest.approx(size / lived)
    crashes = order[late.loc[order.index] & ~order.graceful]
    assert row["crash_detected_after_s_mean"] == pytest.approx((crashes.down / 7e3).mean())
    assert row["crash_repaired_after_s_mean"] == pytest.approx((crashes.node / 10.0).mean())


def test_a_window_where_nobody_lives_has_no_rates(tmp_path):
    """Every node gone for good before the warm-up ends: no node-seconds, so no rates (NaN), no departures."""
    from scribe_spark.cli.job import plan
    from scribe_spark.experiments import churn as pt
    p = plan("churn", ["--conf", str(TINY), "--out", str(tmp_path), "--set", "warmup_s=40"]).params
    down = np.linspace(1_000.0, 30_000.0, 100)
    gone = pt.Departures.of(np.arange(100), down, np.full(100, np.inf), np.zeros(100, bool))
    lookups = pd.DataFrame({"t_issue": [5_000.0], "src": [3], "key_hi": [1], "key_lo": [2]})
    done = pd.DataFrame({"lid": [0], "outcome": ["correct"], "dest": [4], "t_done": [5_100.0], "hops": [1],
                         "timeouts": [0], "latency_ms": [100.0]})
    sent = pd.DataFrame({"t_ms": np.arange(0.0, 50_000.0, 10_000.0), **{k: 1 for k in timed.MAINTENANCE}})
    got = timed.TimedRun(done, *[pd.DataFrame()] * 3, None, sent, 1, *[pd.DataFrame()] * 2)
    rep = pd.DataFrame({"left_s": down / 1000.0, "graceful": False, "detected_after_s": 1.0,
                        "leaf_sets_repaired_after_s": 2.0})
    row = pt.sweep_row(p, small_ring(100), gone, lookups, got, rep)
    assert row["departures"] == row["returns"] == row["lookups"] == 0
    assert np.isnan(row["maintenance_msgs_per_node_s"]) and np.isnan(row["maintenance_bytes_per_node_s"])


def test_downtimes_too_short_to_tell_from_their_start_still_end_after_it(tmp_path):
    """A Weibull of shape 0.1 draws many downtimes below a float's step at their time: the node still comes
    back (after its going), so nearly every departure of a long run with returns is followed by one."""
    from scribe_spark.cli.job import plan
    from scribe_spark.experiments.churn import workload
    sets = ["recover_share=1", "duration_s=3600", "mean_downtime_s=60", "downtime=weibull",
            "downtime_weibull_shape=0.1"]
    p = plan("churn", ["--conf", str(TINY), "--out", str(tmp_path),
                              *(a for kv in sets for a in ("--set", kv))]).params
    spans = workload(p, 60.0)[0].spans
    back = spans[np.isfinite(spans.up)]
    assert (back.up > back.down).all() and len(back) > 0.97 * len(spans), len(back) / len(spans)


@pytest.mark.parametrize("law", ["exponential", "weibull", "pareto"])
def test_downtimes_come_from_the_law_asked_for(tmp_path, law):
    """Returning nodes stay down for draws of `downtime`'s law of mean `mean_downtime_s`: the spread of a
    Weibull of shape 0.5 (coefficient of variation sqrt(5)), the floor of a Pareto (mean x (alpha - 1) /
    alpha)."""
    from scribe_spark.cli.job import plan
    from scribe_spark.experiments.churn import _returning, workload
    shapes = {"weibull": ("downtime_weibull_shape=0.5",), "pareto": ("downtime_pareto_shape=3",)}
    sets = ["recover_share=1", "duration_s=3600", "mean_downtime_s=5", f"downtime={law}"]
    sets += shapes.get(law, ())
    p = plan("churn", ["--conf", str(TINY), "--out", str(tmp_path),
                              *(a for kv in sets for a in ("--set", kv))]).params
    gone, _ = workload(p, 60.0)
    back = gone.spans[np.isfinite(gone.spans.up)]
    down = (back.up - back.down).to_numpy() / 1000.0
    assert len(down) > 4000 and down.mean() == pytest.approx(5.0, rel=0.1)
    cv = down.std() / down.mean()
    assert {"exponential": 0.9 < cv < 1.1, "weibull": cv > 1.8, "pareto": cv < 0.8}[law], cv
    if law == "pareto":
        assert down.min() >= 5.0 * 2 / 3 * (1 - 1e-9)
    assert {"exponential": "(exponential)", "weibull": "(Weibull, k = 0.5)",
            "pareto": "(Pareto, alpha = 3)"}[law] in _returning(p)


@pytest.mark.slow
def test_a_sweep_is_reported_point_by_point_and_against_the_swept_knob(tiny, tmp_path):
    """Two points (the tiny run's tables under two keep-alive periods): their lines, the sweep plots and
    each point in the summary."""
    from dataclasses import replace

    from scribe_spark.cli.job import plan
    from scribe_spark.experiments import churn
    from scribe_spark.experiments.outputs import Outcome
    from scribe_spark.experiments.run import Run
    folder = tiny("churn")
    p = plan("churn", ["--conf", str(TINY), "--out", str(tmp_path)]).params
    p = replace(p, keepalive_s=(3.0, 6.0))
    tables = {name: pd.concat([pd.read_csv(folder / f"{name}.csv").assign(keepalive_s=k) for k in (3.0, 6.0)])
              for name in ("timeline", "repairs", "sweep")}
    note = {"mean_session_s": 600.0, "crashes": 4, "leaves": 4, "lookups": 591, "passes": 5, "messages": {}}
    points = [{**note, "keepalive_s": k} for k in (3.0, 6.0)]
    outcome = Outcome(tables, {"points": points, "checked": True})
    churn.report(outcome, p, Run("churn", p, tmp_path))
    for png in ("lookups", "latency", "maintenance", "repairs", "sweep_failures", "sweep_latency",
                "sweep_maintenance"):
        assert (tmp_path / f"{png}.png").stat().st_size > 0, png
    summary = (tmp_path / "summary.md").read_text()
    assert "keep-alive 3 s: 4 crash" in summary and "keep-alive 6 s: 4 crash" in summary


LAW_WORDS = [("exponential", [], "0.693 x mean (exponential)"),
             ("weibull", ["weibull_shape=0.5"], "0.24 x mean (weibull)")]


@pytest.mark.parametrize("session, shape, words", LAW_WORDS)
def test_a_session_sweep_is_also_drawn_against_the_median(tmp_path, monkeypatch, session, shape, words):
    """Swept over mean sessions, each sweep plot has a second axis of median sessions, the law's median over
    its mean (ln 2 for the exponential, (ln 2)^2 / Gamma(3) for a Weibull of shape 0.5)."""
    import contextlib

    import matplotlib.pyplot as plt

    from scribe_spark.cli.job import plan
    from scribe_spark.experiments import churn
    from scribe_spark.experiments.run import Run
    axes = []

    @contextlib.contextmanager
    def figure(path, title, xlabel, ylabel):
        fig, ax = plt.subplots()
        axes.append(ax)
        yield ax
        plt.close(fig)
    monkeypatch.setattr(churn.plots, "figure", figure)
    sets = [f"session={session}", "mean_session_s=[600, 1200]", *shape]
    p = plan("churn", ["--conf", str(TINY), "--out", str(tmp_path),
                              *(a for kv in sets for a in ("--set", kv))]).params
    sweep = pd.DataFrame({"mean_session_s": [600.0, 1200.0], "keepalive_s": 3.0, "lookup_wrong": 0.01,
                          "lookup_lost": 0.0, "lookup_latency_ms_p99": 900.0,
                          "maintenance_msgs_per_node_s": 1.0})
    churn._sweep_plots(sweep, p, Run("churn", p, tmp_path))
    assert len(axes) == 3
    for ax in axes:
        (top,) = ax.child_axes
        assert top.get_xlabel() == f"median session (s): {words}"


def test_fixed_point_runs_until_a_pass_changes_nothing(spark, progress):
    """A chain of events, each one unit after its cause, takes one pass per link and one to confirm."""
    seed = spark.createDataFrame([(0.0,)], "t double")
    news = []

    def derive(events, p, changed):
        news.append(None if changed is None else sorted(r.t for r in changed.collect()))
        later = events.filter(F.col("t") < 4).select((F.col("t") + 1).alias("t"))
        return bsp.Pass(seed.unionByName(later).distinct())
    last, passes = bsp.fixed_point("chain", seed.limit(0), derive, bound=10)
    assert sorted(r.t for r in last.events.collect()) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert passes == 6 and progress[-1].startswith("chain pass 6: 5 events, 0 changed")
    assert news == [None, [0.0], [1.0], [2.0], [3.0], [4.0]]   # each pass is told what the last one added
    with pytest.raises(bsp.SuperstepBoundExceeded, match="chain: the events still changed after 3 passes"):
        bsp.fixed_point("chain", seed.limit(0), derive, bound=3)


def test_as_of_reads_the_version_in_force(spark):
    """A row reads the version whose interval holds its time; none in force gives nulls."""
    versions = spark.createDataFrame([(1, float("-inf"), 5.0, "a"), (1, 5.0, float("inf"), "b")],
                                     "node long, t_from double, t_to double, state string")
    rows = spark.createDataFrame([(1, 4.9), (1, 5.0), (2, 1.0)], "at long, t double")
    got = {(r.at, r.t): r.state for r in bsp.as_of(rows, "at", "t", versions).collect()}
    assert got == {(1, 4.9): "a", (1, 5.0): "b", (2, 1.0): None}


def test_timers_refuse_what_breaks_causality():
    """A zero hop cost would let an effect happen at its cause's time: refused."""
    with pytest.raises(ValueError, match="proc_ms must be positive"):
        timed.Timers(1000.0, 1000.0, 500.0, 0.0, 20_000.0)


def test_a_run_without_departures_or_lookups_has_empty_tables_not_errors(spark):
    """No departure: repairs.csv and its statistics have no rows; no lookup: the lookups frame is empty."""
    from scribe_spark.experiments.churn import Departures, _delays, repairs

    class Run:   # the parts of a TimedRun the tables read
        detections = pd.DataFrame({"failed": [], "detector": [], "t": []}).astype(float)
        repair_starts = pd.DataFrame({"node": [], "failed": [], "asked": [], "t": []}).astype(float)
        repairs = pd.DataFrame({"node": [], "t": []}).astype(float)
    rep = repairs(Departures.of_times({}), Run).assign(mean_session_s=600.0, keepalive_s=3.0)
    assert rep.empty and rep.graceful.dtype == bool and _delays(rep).empty
    none = pd.DataFrame({"t_issue": [], "src": [], "key_hi": [], "key_lo": []})
    assert timed._lookup_frame(spark, small_ring(30), none).count() == 0


def test_probes_are_binned_the_same_a_few_rows_at_a_time(monkeypatch):
    """The ticks expanded a chunk of rows at a time give the counts of one expansion, and their sum is
    the closed form's single bin."""
    ring = small_ring(60, leaf=8)
    tm = timed.Timers(1000.0, 1000.0, 500.0, 1.0, 20_000.0)
    crash = timed.Downs.of({3: 2500.0, 17: 7000.0})
    members = timed.kernels.leaf_sets(ring, np.arange(60))
    df = pd.DataFrame({"x": np.repeat(np.arange(60), 8), "y": np.concatenate(members),
                       "t_from": -np.inf, "t_to": np.inf})
    args = (ring, crash, tm, 5, 9000.0)
    whole = timed._probes_answered(*args, timed.Bins(9000.0, 700.0), df)
    monkeypatch.setattr(timed, "TICKS_AT_ONCE", 37)
    chunked = timed._probes_answered(*args, timed.Bins(9000.0, 700.0), df)
    one = timed._probes_answered(*args, timed.Bins(9000.0, None), df)
    assert all(np.array_equal(a, b) for a, b in zip(whole, chunked)) and len(whole[0]) == 13
    assert [int(c.sum()) for c in whole] == [int(c[0]) for c in one] and whole[1].sum() < whole[0].sum()


def test_a_node_refills_a_table_entry_a_lookup_found_dead_and_only_then():
    """The fold's table repair, on one node: a lookup's declaration asks the nearest other entry of the row;
    a usable reply fills the slot and the next version carries it; a keep-alive's declaration, or any
    declaration with table repair off, asks nobody."""
    ring = small_ring(60, model="matrix", leaf=8)
    x = 0
    leaf = kernels.leaf_sets(ring, np.array([x]))[0].tolist()
    table = kernels.routing_tables(ring, [x])[0].tolist()
    slot = kernels.table_slot(ring, ring.hi, ring.lo, np.zeros(ring.n, np.int64))[1]
    # a row-0 entry outside the leaf set, with another node that fits its slot
    s = next(i for i, e in enumerate(table[:16]) if e >= 0 and e not in leaf and (slot == i).sum() > 1)
    y = table[s]
    row = [e for e in table[:16] if e >= 0 and e != y]
    nearest = min(row, key=lambda e: (float(ring.prox.dist([x], [e])[0]), e))
    for kind, repair, asks in ((timed.LOOKUP, True, 1), (timed.LEAVE, True, 0), (timed.LOOKUP, False, 0)):
        node = timed._Node(ring, x, leaf, repair)
        node.table = table
        assert node.handle(0, 10.0, kind, y, [])
        asked = [(a, b) for _x, k, _t, a, b, *_ in node.rows if k == "table_ask"]
        assert asked == [(s, nearest)] * asks and node._entry(s) == -1
    e = next(int(v) for v in np.flatnonzero(slot == s) if v != y)
    node = timed._Node(ring, x, leaf)
    node.table = table
    node.handle(0, 10.0, timed.LOOKUP, y, [])
    assert not node.handle(1, 15.0, timed.TABLE, y + 1 if y + 1 != nearest else y + 2, [s, e])   # not asked
    assert node.handle(2, 20.0, timed.TABLE, nearest, [s, e])
    node.version()
    assert node._entry(s) == e and node.rows[-1][-3:] == ([s], [e], [])


def _folded(node: timed._Node, events: list[tuple], until: float = 1e9) -> list[tuple]:
    """The rows of one node's fold over events (t, prio, set_t, set_by, ord, kind, other, members)."""
    flat, rows, at = [], [], 0
    for *head, members in sorted(events, key=lambda e: e[:5]):
        rows.append((*head, at, at + len(members)))
        flat += members
        at += len(members)
    return timed._fold_node(node, until, iter(rows), flat)


def test_a_node_with_books_answers_its_table_requests_as_the_next_pass_would():
    """A node answers its table requests itself, a live node's reply from its entries (BOOK), a dead node's
    timeout with none: the timeout declares it and the node asks the next one, whose reply fills the
    slot; the log is the one the node writes when those come as events (a pass later)."""
    ring = small_ring(60, model="matrix", leaf=8)
    x, until = 0, 1e9
    leaf = kernels.leaf_sets(ring, np.array([x]))[0].tolist()
    table = kernels.routing_tables(ring, [x])[0].tolist()
    slot = kernels.table_slot(ring, ring.hi, ring.lo, np.zeros(ring.n, np.int64))[1]
    s = next(i for i, e in enumerate(table[:16]) if e >= 0 and e not in leaf and (slot == i).sum() > 1)
    y = table[s]
    near = sorted((float(ring.prox.dist([x], [e])[0]), e) for e in table[:16] if e >= 0 and e != y)
    first, second = near[0][1], near[1][1]
    e = next(int(v) for v in np.flatnonzero(slot == s) if v != y)
    tm = timed.Timers(keepalive_ms=3000.0, failure_timeout_ms=500.0, rto_ms=500.0, proc_ms=0.1,
                      lookup_timeout_ms=10_000.0)
    crash = timed.Downs.of({first: 5.0})   # dead when asked
    wire = timed._Wire(ring, crash, tm, until)
    rt = (-np.inf, 0, -np.inf, 0, 0, timed.RT, -1, table)
    found = (10.0, timed.TIMER, 9.5, timed.BY_HANDLER, timed.AFTER_HANDLER, timed.LOOKUP, y, [])
    books = [(-np.inf, 0, -np.inf, 1, 0, timed.BOOK, w, [s, e if w == second else -1]) for _d, w in near
             if w != first]
    answered = _folded(timed._Node(ring, x, leaf, True, wire), [rt, found, *books])
    kinds = [(k, a, b) for _x, k, _t, a, b, *_ in answered if k != "version"]
    assert kinds == [("detected", y, -1), ("table_ask", s, first), ("detected", first, -1),
                     ("table_ask", s, second), ("table_repaired", s, e)]
    # the same node answering nothing itself, given the timeout and the reply as the next passes derive them
    order = {w: q for _x, k, _t, _a, w, q, *_ in answered if k == "table_ask"}
    t_a, t_r, _ok = timed._request_times(ring, crash, tm, until, np.array([x]), np.array([second]),
                                         np.array([10.0 + 500.0]))
    fail = (510.0, timed.TIMER, 10.0, timed.BY_HANDLER, order[first], timed.TABLE_FAIL, first, [s])
    reply = (float(t_r[0]), timed.MESSAGE, float(t_a[0]), timed.BY_HANDLER, order[second], timed.TABLE,
             second, [s, e])
    asked = _folded(timed._Node(ring, x, leaf, True), [rt, found, fail, reply])
    assert answered == asked and len(answered) > len(kinds)


def test_a_steady_start_draws_each_node_down_with_the_steady_chance(tmp_path):
    """start = steady: each node is down at the start with chance D / (S + D), gone since -inf for a
    residual downtime; the others draw as with every node up, and so do the lookups. The timeline counts
    the absent nodes out of the members from the start and not among the departures; repairs.csv has no
    row for them."""
    from scribe_spark.cli.job import plan
    from scribe_spark.experiments import churn as pt
    args = ["--conf", str(TINY), "--out", str(tmp_path), "--set", "nodes=4000", "--set", "recover_share=1",
            "--set", "mean_downtime_s=60"]
    p = plan("churn", [*args, "--set", "start=steady"]).params
    gone, lookups = pt.workload(p, 60.0)
    everyone, asked = pt.workload(plan("churn", args).params, 60.0)
    pd.testing.assert_frame_equal(lookups, asked)
    absent = gone.absent
    assert abs(len(absent) - 2000) < 5 * np.sqrt(4000 * 0.25)
    first = gone.spans.drop_duplicates("node").set_index("node")
    assert (first.down[absent] == -np.inf).all() and not first.graceful[absent].any()
    present = everyone.spans.drop_duplicates("node").set_index("node").drop(absent, errors="ignore")
    assert first.down.drop(absent).to_dict() == present.down.to_dict()
    assert gone.counts()["absent"] == len(absent) and np.isfinite(gone.within.down).all()
    n, bins = len(lookups), np.arange(0.0, 50_000.0, 10_000.0)
    done = pd.DataFrame({"lid": np.arange(n), "outcome": "correct", "dest": 0, "t_done": lookups.t_issue,
                         "hops": 0, "timeouts": 0, "latency_ms": 1.0})
    sent = pd.DataFrame({"t_ms": bins, **{k: 0 for k in timed.MAINTENANCE}})
    def none(*cols: str) -> pd.DataFrame:
        return pd.DataFrame({c: np.zeros(0, np.float64 if c == "t" else np.int64) for c in cols})
    got = timed.TimedRun(done, none("failed", "detector", "t"), none("node", "failed", "asked", "t"),
                         none("node", "t"), None, sent, 1, none(), none())
    line = pt.timeline(p, small_ring(4000), gone, lookups, got)
    s, end = gone.within, 10_000.0
    gone0 = int((s.down < end).sum())
    back0 = int((gone.spans.up < end).sum())
    assert line.members.iat[0] == 4000 - len(absent) - gone0 + back0
    assert (line.crashes + line.leaves).sum() == len(s)
    assert line.returns.sum() == np.isfinite(gone.spans.up).sum()
    assert len(pt.repairs(gone, got)) == len(s)


def test_residual_downtimes_are_those_of_a_downtime_under_way():
    """A Weibull of shape 0.5 has a coefficient of variation of sqrt(5): what remains of a downtime under
    way at a random moment has mean D (1 + 5) / 2 = 3 D; the exponential's is D (memoryless)."""
    from dataclasses import replace

    from scribe_spark.config import ChurnParams
    from scribe_spark.experiments import churn as pt
    p = ChurnParams(mean_downtime_s=60.0, downtime="weibull", downtime_weibull_shape=0.5)
    rest = pt._downtimes(p, np.random.default_rng(1), 400_000, residual=True)
    assert rest.mean() == pytest.approx(3 * 60_000.0, rel=0.03)
    plain = pt._downtimes(replace(p, downtime="exponential"), np.random.default_rng(1), 400_000,
                          residual=True)
    assert plain.mean() == pytest.approx(60_000.0, rel=0.01)
