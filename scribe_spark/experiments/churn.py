"""Churn run: nodes leave and join continuously while lookups and Scribe events go on.

`nodes` members start converged, with Scribe trees for `topics` topics. Every member has a
session time drawn from `session`'s law (exponential, Weibull or Pareto, mean `mean_session_s`;
the members at the start draw what remains of a session under way); newcomers arrive as a Poisson
process whose rate, nodes / mean_session_s, keeps the size steady, from a pool of fresh ids. With
`session = "trace"` the file's sessions decide who is online when, each session a node id of its
own. Time advances in epochs of `epoch_s`. In each epoch:

1. the members whose sessions end in the epoch leave: a share `leave_share` of them gracefully, whose
   departure is repaired at once (Pastry's leaf sets and every routing-table entry naming them,
   then Scribe's trees, as in step 3: as if each told every node that points at it), the others
   crash silently;
2. before anyone notices: `lookups` random keys from random live members are routed (a node
   that forwards to a dead node times out and picks again, as in `pastry_failures`) and
   checked against the brute-force closest live node; every topic publishes one event,
   delivered to the live subscribers still joined to a live root by live tree edges;
3. Pastry repairs (leaf sets and every dead routing-table entry: `failures.repair`, eager, so
   that the tree repair's SUBSCRIBEs meet no dead entry), then Scribe repairs its trees
   (`repair.repair_trees`: expiry, re-subscribe, root failover with replicated state);
4. the epoch's newcomers join (`joins.join_batch`); a root that is no longer the topicId's
   destination hands the topic to the newcomer that is (`repair.handoff`);
5. after all that, the same checks again: lookups and event delivery on the repaired overlay.
Newcomers do not subscribe, so subscribers thin out with time. A topic whose new root lacks
the replicated state is lost from then on (its events are not delivered).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd

from scribe_spark import bsp, ids
from scribe_spark import report as plots
from scribe_spark.config import ChurnParams
from scribe_spark.experiments.outputs import Outcome
from scribe_spark.experiments.run import Run
from scribe_spark.pastry import failures as fl
from scribe_spark.pastry import joins
from scribe_spark.pastry import overlay as ov
from scribe_spark.pastry.kernels import Ring
from scribe_spark.reference import closest
from scribe_spark.scribe import repair as rp
from scribe_spark.scribe import trees as tr
from scribe_spark.scribe.trees import NODE, TOPIC
from scribe_spark.sessions import SessionLaw, read_trace
from scribe_spark.spark.session import spark_session
from scribe_spark.streams import Purpose, stream
from scribe_spark.workloads import scribe_groups
from scribe_spark.workloads.churn_models import LawChurn, TraceChurn
from scribe_spark.workloads.network import make_ring, shared_network


def _lookups(overlay, alive, count, rng):
    """Route lookups from live nodes; the state may still name dead nodes (they time out)."""
    src = rng.choice(np.flatnonzero(alive), count)
    khi, klo = ids.random_ids(count, rng)
    routed = closest.checked_lookups(overlay, src, khi, klo, alive, dead=~alive)
    return float(routed.correct.mean()), float(routed.hops.mean()), float(routed.timeouts.mean())


def _delivery(overlay, trees, subs: pd.DataFrame, dead: np.ndarray, lost: set[int]) -> tuple[float, int]:
    live = subs[~dead[subs[NODE].to_numpy()]]
    if live.empty:
        return 1.0, 0
    got = rp.joined(overlay, trees, live, dead) & ~live[TOPIC].isin(lost).to_numpy()
    return float(got.mean()), len(live)


def churn_model(p: ChurnParams) -> LawChurn | TraceChurn:
    """The run's churn: a session law of mean `mean_session_s`, or the sessions of a trace."""
    if p.session == "trace":
        return TraceChurn(read_trace(p.trace), p.trace)
    return LawChurn(SessionLaw.of(p, p.mean_session_s), p.nodes)


def simulate(p: ChurnParams, run: Run) -> Outcome:
    """Simulate `epochs` epochs of churn: one row per epoch."""
    with bsp.quiet():   # one line per epoch, not the superstep lines of every lookup, repair and join
        return _churn(p, run)


@dataclass
class _World:
    """The churn run's state between epochs."""

    ring: Ring
    overlay: ov.Overlay
    trees: tr.Trees
    alive: np.ndarray
    ends: np.ndarray           # each node's session end (s); inf for a newcomer still in the pool
    pool: Iterator[int]        # ids of the newcomers not yet joined
    lost: set[int]             # topics whose new root lacked the replicated state
    model: LawChurn | TraceChurn   # sessions under way at the start, and arrivals


def _churn(p: ChurnParams, run: Run) -> Outcome:
    spark = spark_session(run.name)
    routers, matrix = shared_network(p, p.seed)
    model = churn_model(p)
    universe = model.universe                     # the first `nodes` start as members, the rest are newcomers
    ring = make_ring(universe, p, p.seed, routers, matrix, spark=spark)
    rng = stream(p.seed, Purpose.CHURN, p.nodes)
    members = np.arange(p.nodes)
    overlay = joins.initial_overlay(spark, ring, members)
    alive = np.zeros(universe, dtype=bool)
    alive[members] = True
    ends = np.full(universe, np.inf)
    ends[members] = model.start(rng)              # what remains of the sessions under way at time 0
    topics, sub_t, sub_n = scribe_groups.subscriptions(p, rng)
    subs = pd.DataFrame({TOPIC: sub_t, NODE: sub_n})
    subs_df = tr.subscriptions_frame(spark, sub_t, sub_n)
    world = _World(ring, overlay, tr.subscribe(overlay, topics, subs_df), alive, ends,
                   iter(range(p.nodes, universe)), set(), model)
    run.log(f"{p.nodes} members, {p.topics} topics, {len(subs)} subscriptions; {model.describe()}, "
            f"epochs of {p.epoch_s:.0f}s")
    rows = [_epoch(p, run, world, e, topics, subs, subs_df, rng) for e in range(p.epochs)]
    world.overlay.state.unpersist()
    return Outcome({"churn": pd.DataFrame(rows)}, {"subscriptions": len(subs), "churn": model.describe()})


def _epoch(p: ChurnParams, run: Run, w: _World, e: int, topics, subs: pd.DataFrame, subs_df,
           rng: np.random.Generator) -> dict:
    """One epoch: departures, checks, repair, joins and handoffs, checks again; its row of churn.csv."""
    t0 = time.time()
    now, until = e * p.epoch_s, (e + 1) * p.epoch_s
    leaving = np.flatnonzero(w.alive & (w.ends < until))
    dead = ~w.alive
    dead[leaving] = True
    graceful = leaving[stream(p.seed, Purpose.LEAVES, e).random(len(leaving)) < p.leave_share]
    costs = _Costs()
    if len(graceful):   # 1. graceful leaves: repaired before anyone routes
        gone = ~w.alive
        gone[graceful] = True
        w.overlay, w.trees = _repair(p, w, gone, topics, subs_df, costs, handover=True)
    # 2. before repair
    correct_before, hops_before, timeouts_before = _lookups(w.overlay, ~dead, p.lookups, rng)
    delivered_before, n_subs = _delivery(w.overlay, w.trees, subs, dead, w.lost)
    # 3. repair
    repaired, trees = _repair(p, w, dead, topics, subs_df, costs)
    w.alive[leaving] = False
    # 4. joins and root handoffs
    xs, join_counts, handoffs = _joins(p, w, repaired, trees, topics, until, rng)
    _check_roots(w, topics, e)
    # 5. after repair and joins
    correct_after, hops_after, timeouts_after = _lookups(w.overlay, w.alive, p.lookups, rng)
    delivered_after, _ = _delivery(w.overlay, w.trees, subs, ~w.alive, w.lost)
    row = {"epoch": e, "time_s": now, "members": int(w.alive.sum()), "left": len(leaving),
           "left_gracefully": len(graceful), "joined": len(xs),
           "lookups_correct_before_repair": correct_before, "mean_hops_before_repair": hops_before,
           "timeouts_per_lookup_before_repair": timeouts_before,
           "lookups_correct_after_repair": correct_after, "mean_hops_after_repair": hops_after,
           "timeouts_per_lookup_after_repair": timeouts_after,
           "live_subscriptions": n_subs, "event_delivery_before_repair": delivered_before,
           "event_delivery_after_repair": delivered_after,
           "pastry_repair_messages": costs.pastry, "scribe_repair_messages": costs.scribe,
           "join_messages": sum(join_counts.values()), "root_failovers": costs.failovers,
           "root_handoffs": handoffs, "topics_lost": len(w.lost)}
    run.log(f"epoch {e}: {row['left']} left, {row['joined']} joined, {row['members']} members; lookups "
            f"correct {correct_before:.4f} before repair, {correct_after:.4f} after; event delivery "
            f"{delivered_before:.4f} / {delivered_after:.4f} ({time.time() - t0:.1f}s)")
    return row


@dataclass
class _Costs:
    """The repair messages and root failovers of an epoch, summed over its repairs."""

    pastry: int = 0
    scribe: int = 0
    failovers: int = 0


def _repair(p: ChurnParams, w: _World, dead: np.ndarray, topics, subs_df, costs: _Costs,
            handover: bool = False):
    """Pastry repairs the departures in `dead` (leaf sets and every dead entry: `failures.repair`, eager,
    so that the tree repair's SUBSCRIBEs meet no dead entry), then Scribe its trees; return both.

    With `handover` (graceful leaves) a leaving root hands its topic's state to the new root, so no
    topic is lost, whichever replicas leave with it."""
    roots = w.trees.roots.toPandas().set_index(TOPIC)[NODE]
    failed_roots = {int(t): int(r) for t, r in roots.items() if dead[r]}
    leaf_sets = w.overlay.state.select("id", "leaf").toPandas()
    replica_sets = rp.replicas(w.ring, leaf_sets, topics, failed_roots, p.replicas)
    repaired, pcounts = fl.repair(w.overlay, dead)
    fixed = rp.repair_trees(repaired, topics, w.trees, subs_df, dead, replica_sets)
    if not handover:
        w.lost |= set(fixed.failover.loc[~fixed.failover.replicated, TOPIC].astype(int))
    w.overlay.state.unpersist()
    costs.pastry += pcounts["leaf_messages"] + pcounts["table_messages"]
    costs.scribe += fixed.counts["subscribe_messages"] + fixed.counts["unsubscribe_messages"]
    costs.failovers += fixed.counts["root_failovers"]
    return repaired, fixed.trees


def _joins(p: ChurnParams, w: _World, repaired, trees, topics, until: float,
           rng: np.random.Generator) -> tuple[np.ndarray, dict, int]:
    """The epoch's newcomers join (Poisson arrivals); a root that is no longer the topicId's hands over."""
    ends = w.model.arriving(until, p.epoch_s, rng)
    xs = np.array([next(w.pool) for _ in range(len(ends))], dtype=np.int64)
    join_counts: dict = {}
    w.overlay, w.trees, handoffs = repaired, trees, 0
    if len(xs):
        w.overlay, join_counts = joins.join_batch(repaired, np.flatnonzero(w.alive), xs)
        w.alive[xs] = True
        w.ends[xs] = ends
        w.trees, handoffs = rp.handoff(w.overlay, topics, w.trees)
    return xs, join_counts, handoffs


def _check_roots(w: _World, topics, e: int) -> None:
    """Every root is the live node numerically closest to its topicId (brute force)."""
    now_roots = w.trees.roots.toPandas()
    want = closest.closest_live(w.ring, w.alive, topics.hi, topics.lo)
    wrong = now_roots[now_roots[NODE].to_numpy() != want[now_roots[TOPIC].to_numpy()]]
    if len(wrong):
        raise RuntimeError(f"epoch {e}: {len(wrong)} topics have a root that is not the closest live node")


def _leaves(p: ChurnParams) -> str:
    """How the summary says who leaves how."""
    if p.leave_share == 0:
        return "all silently (crashes)"
    return (f"a share {p.leave_share:g} of them gracefully (their departure repaired before the checks), "
            "the others silently (crashes)")


def report(outcome: Outcome, p: ChurnParams, run: Run) -> None:
    """Plot lookup correctness and event delivery per epoch, before and after repair; summarise."""
    table = outcome.tables["churn"]
    sessions = "sessions from a trace" if p.session == "trace" else f"mean session {p.mean_session_s:.0f}s"
    with plots.figure(run.path("churn.png"), f"churn: {p.nodes} nodes, {sessions}",
                      "time (s)", "share") as ax:
        ax.plot(table.time_s, table.lookups_correct_before_repair, "-o", ms=3,
                label="lookups correct, before repair")
        ax.plot(table.time_s, table.event_delivery_before_repair, "-s", ms=3,
                label="events delivered, before repair")
        ax.plot(table.time_s, table.lookups_correct_after_repair, "--", label="lookups correct, after repair")
        ax.plot(table.time_s, table.event_delivery_after_repair, ":", label="events delivered, after repair")
    run.path("summary.md").write_text(
        f"# churn\n\n{p.nodes} nodes ({p.proximity} model, b={p.b}, |L|={p.leaf_set}), "
        f"{outcome.notes['churn']}, "
        f"{p.epochs} epochs of {p.epoch_s:.0f} s; {p.topics} topics, {outcome.notes['subscriptions']} "
        f"initial subscriptions (newcomers do not subscribe); {p.lookups:,} lookups per check; seed "
        f"{p.seed}. Per epoch, the leaving nodes go at its start, {_leaves(p)}; 'before repair' is measured "
        "right then (a node that forwards to a dead node times out and picks again; timeouts per lookup "
        "are counted, not as hops), 'after repair' once Pastry and Scribe have repaired and the epoch's "
        "newcomers have joined. Event delivery = share of live subscriptions joined to a live root by live "
        "tree edges.\n\n" + plots.markdown_table(table, ".4f") + "\n")
