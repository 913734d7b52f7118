"""Experiment scribe_repair (S3): an event stream while nodes (and some roots) fail and trees repair.

Time runs in rounds of one heartbeat period. In each round every topic's publisher (a node
that does not fail) publishes an event with probability `publish_probability`; the root
numbers it and it reaches, in the same round, every subscriber joined to the root by live
tree edges. At the start of round `fail_round` (F) the failing nodes stop. Children notice
after `timeout` missed heartbeats, so repair (`repair.repair_trees`, on the repaired Pastry
overlay) happens at the start of round D = F + timeout; from then on the repaired trees
carry the stream.

- plain Scribe: an event published in [F, D) reaches only subscribers still joined to a live
  root; events sent to a dead root are lost.
- reliable, ordered extension: every node keeps its last `buffer` events; a repair SUBSCRIBE
  carries the last sequence number delivered and the graft point retransmits the buffered
  events above it, which the orphan forwards down its subtree; a publisher whose root died
  keeps its unacknowledged events and sends them, in order, to the new root, which numbers
  them from the replicated counter.
A topic whose new root lacks the replicated state is lost in both modes. Delivery ratio and
order are measured per (topic, subscriber) on the delivery log for subscribers that stay alive.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from scribe_spark import report as plots
from scribe_spark.config import ScribeRepairParams
from scribe_spark.experiments.outputs import Outcome
from scribe_spark.experiments.run import Run
from scribe_spark.pastry import failures as fl
from scribe_spark.pastry import overlay as ov
from scribe_spark.scribe import repair as rp
from scribe_spark.scribe import trees as tr
from scribe_spark.scribe.reliable import deliveries
from scribe_spark.scribe.trees import NODE, TOPIC
from scribe_spark.spark.arrow import local_frame
from scribe_spark.spark.session import spark_session
from scribe_spark.streams import Purpose, stream
from scribe_spark.workloads import scribe_groups
from scribe_spark.workloads.failures import choose_failures
from scribe_spark.workloads.network import make_ring, shared_network

MODES = ("plain", "reliable")
PHASES = ("before", "during", "after")


def phase_of(rounds: np.ndarray, fail_round: int, timeout: int) -> np.ndarray:
    return np.where(rounds < fail_round, "before", np.where(rounds < fail_round + timeout, "during", "after"))


def measure(log: pd.DataFrame, pub: np.ndarray, subs: pd.DataFrame, fail_round: int,
            timeout: int) -> pd.DataFrame:
    """Return per phase: events, expected and delivered deliveries, ratios, loss, lateness and order."""
    log = log.copy()
    log["phase"] = phase_of(log.published.to_numpy(), fail_round, timeout)
    # order: per subscriber, sequence numbers must rise strictly in delivery order (no reordering, no
    # duplicates)
    back = log.groupby([TOPIC, NODE], sort=False).seq.diff().fillna(1) <= 0
    log["bad"] = back
    per_topic = pd.DataFrame({TOPIC: np.arange(pub.shape[0])})
    rows = []
    for phase in PHASES:
        r = np.flatnonzero(phase_of(np.arange(pub.shape[1]), fail_round, timeout) == phase)
        per_topic["events"] = pub[:, r].sum(axis=1)
        want = subs.merge(per_topic, on=TOPIC)
        got = log[log.phase == phase]
        n = got.groupby([TOPIC, NODE]).event.nunique().rename("got")
        want = want.merge(n, left_on=[TOPIC, NODE], right_index=True, how="left").fillna({"got": 0})
        has = want.events > 0
        ratio = want.got[has] / want.events[has]
        rows.append({"phase": phase, "subscribers": len(subs), "events": int(per_topic.events.sum()),
                     "expected": int(want.events.sum()), "delivered": int(want.got.sum()),
                     "delivery_ratio": want.got.sum() / max(1, want.events.sum()),
                     "subscribers_with_loss": int((ratio < 1).sum()),
                     "min_subscriber_ratio": float(ratio.min()) if len(ratio) else 1.0,
                     "late_deliveries": int((got["round"] > got.published).sum()),
                     "out_of_order_deliveries": int(got.bad.sum()),
                     "out_of_order_subscribers": int(got[got.bad].groupby([TOPIC, NODE]).ngroups)})
    return pd.DataFrame(rows)


def per_round(log: pd.DataFrame, pub: np.ndarray, subs: pd.DataFrame) -> pd.DataFrame:
    """Return per publish round: expected deliveries, the share delivered eventually and on time."""
    size = subs.groupby(TOPIC).size().reindex(range(pub.shape[0]), fill_value=0).to_numpy()
    expected = (pub * size[:, None]).sum(axis=0)
    got = log.groupby("published").size().reindex(range(pub.shape[1]), fill_value=0).to_numpy()
    on_time = log[log["round"] == log.published].groupby("published").size().reindex(range(pub.shape[1]),
                                                                                      fill_value=0).to_numpy()
    return pd.DataFrame({"round": np.arange(pub.shape[1]), "expected": expected,
                         "delivered_fraction": got / np.maximum(1, expected),
                         "on_time_fraction": on_time / np.maximum(1, expected)})


def simulate(p: ScribeRepairParams, run: Run) -> Outcome:
    """Build trees, stream events, fail nodes, repair; measure delivery in both modes and the repair cost."""
    spark = spark_session(run.name)
    t0 = time.time()
    routers, matrix = shared_network(p, p.seed)
    ring = make_ring(p.nodes, p, p.seed, routers, matrix, spark=spark)
    overlay = ov.build_overlay(spark, ring, "proximity", seed=p.seed)
    rng = stream(p.seed, Purpose.WORKLOAD, p.nodes)
    topics, sub_t, sub_n = scribe_groups.subscriptions(p, rng)
    subs_df = tr.subscriptions_frame(spark, sub_t, sub_n)
    trees = tr.subscribe(overlay, topics, subs_df)
    roots = trees.roots.toPandas().set_index(TOPIC)[NODE].reindex(range(p.topics)).to_numpy()
    run.log(f"{p.nodes} nodes, {p.topics} topics, {len(sub_t)} subscriptions: trees built "
            f"({time.time() - t0:.1f}s)")
    dead, publisher = choose_failures(p, roots, rng)
    pub = rng.random((p.topics, p.rounds)) < p.publish_probability
    run.log(f"{int(dead.sum())} nodes fail at round {p.fail_round}, including {int(dead[roots].sum())} topic "
            f"roots; detection after {p.timeout} rounds")
    t0 = time.time()
    repaired, pastry_counts = fl.repair(overlay, dead)
    fixed = _repair_trees(spark, p, ring, overlay, repaired, topics, trees, subs_df, dead, roots, pub)
    repair_s = time.time() - t0
    live = pd.DataFrame({TOPIC: sub_t, NODE: sub_n})
    live = live[~dead[live[NODE].to_numpy()]].reset_index(drop=True)
    n_missing = int((~rp.joined(repaired, fixed.trees, live, dead)).sum())
    if n_missing:
        raise RuntimeError(f"{n_missing} live subscriptions are not joined to a root after repair")
    live["joined"] = rp.joined(overlay, trees, live, dead)
    lost = np.zeros(p.topics, dtype=bool)
    lost[fixed.failover.loc[~fixed.failover.replicated, TOPIC].to_numpy(dtype=np.int64)] = True
    table, rounds, retransmitted = _streams(p, pub, live, dead[roots], lost)
    heartbeats = _heartbeats(spark, p, trees, fixed.trees, dead, pub)
    tables = {"repair": table, "rounds": rounds,
              "messages": _messages(pastry_counts, fixed.counts, heartbeats, retransmitted),
              "tree_repair": _tree_repair(p, fixed.counts, dead, roots, live), "failover": fixed.failover,
              "timings": pd.DataFrame([{"phase": "repair_s", "seconds": round(repair_s, 2)}])}
    overlay.unpersist()
    return Outcome(tables)


def _repair_trees(spark, p: ScribeRepairParams, ring, overlay, repaired, topics, trees, subs_df,
                  dead: np.ndarray, roots: np.ndarray, pub: np.ndarray) -> rp.TreeRepair:
    """Repair the trees on the repaired overlay with the reliable extension's upcalls, and check them."""
    last = pd.DataFrame({TOPIC: np.arange(p.topics, dtype=np.int64),
                         "last": pub[:, :p.fail_round].sum(axis=1).astype(np.int64)})
    replica_sets = rp.replicas(ring, overlay.state.select("id", "leaf").toPandas(), topics,
                               {t: roots[t] for t in np.flatnonzero(dead[roots])}, p.replicas)
    fixed = rp.repair_trees(repaired, topics, trees, subs_df, dead, replica_sets,
                            upcalls=rp.reliable(local_frame(spark, last)))
    asked = fixed.handled.toPandas()     # the subscribeHandler's retransmission requests, one per graft
    if not (asked.above.to_numpy() == last["last"].to_numpy()[asked[TOPIC].to_numpy()]).all():
        raise RuntimeError(
            "a repair SUBSCRIBE reached its graft point without the orphans' last sequence number")
    return fixed


def _streams(p: ScribeRepairParams, pub: np.ndarray, live: pd.DataFrame, root_dead: np.ndarray,
             lost: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Deliver the event stream in both modes: per phase, per round, and the reliable mode's resends."""
    tables, rounds = [], []
    for mode in MODES:
        log = deliveries(pub, live, root_dead, lost, p.fail_round, p.timeout, p.buffer, mode == "reliable")
        tables.append(measure(log, pub, live, p.fail_round, p.timeout).assign(mode=mode))
        rounds.append(per_round(log, pub, live).assign(mode=mode))
        if mode == "reliable":
            retransmitted = int((log.kind == 0).sum())
    table = pd.concat(tables, ignore_index=True)
    table = table[["mode"] + [c for c in table.columns if c != "mode"]]
    return table, pd.concat(rounds, ignore_index=True), retransmitted


def _heartbeats(spark, p: ScribeRepairParams, trees, repaired_trees, dead: np.ndarray,
                pub: np.ndarray) -> int:
    """Heartbeats over all rounds: one per tree edge in each round its topic publishes nothing."""
    def edge_counts(df) -> np.ndarray:
        counts = df.groupBy(TOPIC).count().toPandas().set_index(TOPIC)["count"]
        return counts.reindex(range(p.topics), fill_value=0).to_numpy()

    live_dst = local_frame(spark, pd.DataFrame({"dst": np.flatnonzero(~dead)}))
    edges = {"before": edge_counts(trees.edges), "during": edge_counts(trees.edges.join(live_dst, "dst")),
             "after": edge_counts(repaired_trees.edges)}
    phase = phase_of(np.arange(p.rounds), p.fail_round, p.timeout)
    per_phase_edges = np.stack([edges[ph] for ph in phase], axis=1)
    return int(((~pub) * per_phase_edges).sum())


def _messages(pastry_counts: dict, c: dict, heartbeats: int, retransmitted: int) -> pd.DataFrame:
    return pd.DataFrame([
        {"kind": "pastry_leaf_set_repair", "messages": pastry_counts["leaf_messages"]},
        {"kind": "pastry_routing_table_repair", "messages": pastry_counts["table_messages"]},
        {"kind": "scribe_repair_subscribe", "messages": c["subscribe_messages"]},
        {"kind": "scribe_unsubscribe", "messages": c["unsubscribe_messages"]},
        {"kind": "scribe_heartbeats_all_rounds", "messages": heartbeats},
        {"kind": "reliable_retransmitted_deliveries", "messages": retransmitted}])


def _tree_repair(p: ScribeRepairParams, c: dict, dead: np.ndarray, roots: np.ndarray,
                 live: pd.DataFrame) -> pd.DataFrame:
    failed = int(dead.sum())
    return pd.DataFrame([{"failed_nodes": failed, "failed_roots": int(dead[roots].sum()), **c,
                          "scribe_repair_messages_per_failed_node":
                              (c["subscribe_messages"] + c["unsubscribe_messages"]) / max(1, failed),
                          "disconnected_subscribers": int((~live.joined).sum()),
                          "live_subscribers": len(live),
                          "detection_rounds": p.timeout}])


def report(outcome: Outcome, p: ScribeRepairParams, run: Run) -> None:
    """Plot delivery by publish round in both modes; write the summary."""
    t = outcome.tables
    _plots(p, run, t["rounds"])
    _summary(p, run, t["repair"], t["tree_repair"], t["messages"], t["failover"])


def _plots(p: ScribeRepairParams, run: Run, rounds: pd.DataFrame) -> None:
    with plots.figure(run.path("delivery_by_round.png"),
                       f"{p.nodes} nodes, {100 * p.fail_fraction:g}% fail at round "
                       f"{p.fail_round}", "publish round", "share of deliveries") as ax:
        for mode, style in zip(MODES, ("-o", "--s")):
            r = rounds[rounds["mode"] == mode]
            ax.plot(r["round"], r.delivered_fraction, style, ms=3, label=f"{mode}: delivered")
        r = rounds[rounds["mode"] == "plain"]
        ax.plot(r["round"], r.on_time_fraction, ":", label="on time (both)")
        ax.axvspan(p.fail_round - 0.5, p.fail_round + p.timeout - 0.5, color="grey", alpha=0.15,
                   label="outage")
        ax.set_ylim(bottom=0)
        plots.whole_x(ax)


def _summary(p, run, table, repair, messages, failover) -> None:
    run.path("summary.md").write_text(
        f"# scribe_repair\n\n{p.nodes} nodes ({p.proximity} model, b={p.b}, |L|={p.leaf_set}), {p.topics} "
        f"topics (sizes floor(N r^-{p.size_exponent} + 0.5)), seed {p.seed}. Rounds of one heartbeat period; "
        f"each topic publishes with probability {p.publish_probability} per round. "
        f"{int(repair.failed_nodes[0])} nodes ({100 * p.fail_fraction:g}%, including the roots of "
        f"{int(repair.failed_roots[0])} topics: {p.failed_roots} topics chosen, the others' roots failing at "
        f"random or shared with a chosen topic; publishers never fail) fail at the start of round "
        f"{p.fail_round}; children detect after {p.timeout} missed heartbeats, so repair takes effect in "
        f"round {p.fail_round + p.timeout}. Phases are by publish round: before [0, {p.fail_round}), during "
        f"[{p.fail_round}, {p.fail_round + p.timeout}), after. Reliable extension: buffers of {p.buffer} "
        f"events, root state replicated on the {p.replicas} nodes of the root's leaf set nearest the "
        "topicId. Ratios are over subscribers that stay alive; order is checked on the delivery log "
        "(sequence numbers must rise strictly per subscriber).\n\n"
        + plots.markdown_table(table, ".4f") + "\n\n## Tree repair\n\n"
        + plots.markdown_table(repair.T.reset_index().rename(columns={"index": "quantity", 0: "value"}),
                                ".3f")
        + "\n\n## Messages\n\n" + plots.markdown_table(messages, ".0f")
        + f"\n\n## Root failovers\n\n{len(failover)} topics changed root; "
        f"{int((~failover.replicated).sum())} new roots lacked the replicated state (topic lost).\n")
