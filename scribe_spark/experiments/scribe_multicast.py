"""Experiments scribe_multicast (S1) and scribe_small_groups (S2).

Scribe trees next to IP: delay penalty (RMD, RAD) against IP unicast from the root, node stress
and tree shape under any proximity model; on a transit-stub network (the default, as in the
Scribe paper) also link stress, next to IP multicast on the same routers.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from scribe_spark import bsp, ids
from scribe_spark import report as plots
from scribe_spark.config import ScribeParams
from scribe_spark.experiments import overlays
from scribe_spark.experiments.outputs import Outcome
from scribe_spark.experiments.run import Run
from scribe_spark.pastry import overlay as ov
from scribe_spark.scribe import metrics
from scribe_spark.scribe import topics as tp
from scribe_spark.scribe import trees as tr
from scribe_spark.scribe.trees import DST, NODE, SRC, TOPIC
from scribe_spark.spark import arrow
from scribe_spark.spark.session import spark_session
from scribe_spark.streams import Purpose, stream
from scribe_spark.workloads import scribe_groups, spark_groups
from scribe_spark.workloads.network import make_ring, shared_network
from scribe_spark.workloads.scribe_groups import rooted_at


def simulate(p: ScribeParams, run: Run) -> Outcome:
    """Build all Scribe trees and measure them against IP (and IP multicast, on routers)."""
    spark = spark_session(run.name)
    t = {}
    t0 = time.time()
    routers, matrix = shared_network(p, p.seed)
    if routers is not None:
        run.log(f"transit-stub network: {routers.n_routers} routers, {len(routers.edges)} links")
    ring = make_ring(p.nodes, p, p.seed, routers, matrix, spark=spark)
    overlay = overlays.build(spark, ring, p, run, partitions=p.partitions or None)
    t["state_build_s"] = time.time() - t0
    run.log(f"Pastry state for {p.nodes} nodes built ({t['state_build_s']:.1f}s)")
    w = _workload(spark, p, ring, run)
    t0 = time.time()
    trees = tr.subscribe(overlay, w.topics, w.subs)
    n_edges = bsp.rows(trees.edges)
    t["subscribe_s"] = time.time() - t0
    run.log(f"trees built: {n_edges} edges in {trees.supersteps} supersteps ({t['subscribe_s']:.1f}s)")
    t0 = time.time()
    tables, naming = _measure(spark, p, run, overlay, routers, trees, w)
    t["metrics_s"] = time.time() - t0
    run.log(f"metrics computed ({t['metrics_s']:.1f}s)")
    if p.save_trees:
        _save_trees(trees, w.subs, ring, w.topics, run)
    overlay.unpersist()
    tables["timings"] = pd.DataFrame([{"phase": k, "seconds": round(v, 2)} for k, v in t.items()])
    notes = {"subscriptions": w.n_subs, "edges": n_edges, "naming": naming, "seconds": t,
             "subscribe_refused": w.refused_sub, "publish_refused": w.refused_pub}
    return Outcome(tables, notes)


@dataclass
class _Workload:
    """Topics, the accepted subscriptions and publications, each topic's publisher and creator."""

    topics: tp.Topics
    subs: DataFrame
    published: DataFrame
    publisher: np.ndarray
    creator: np.ndarray | None
    n_subs: int
    refused_sub: int
    refused_pub: int


def _workload(spark, p: ScribeParams, ring, run: Run) -> _Workload:
    """Draw the subscriptions and the forged requests in Spark, and admit those with the right credentials."""
    topics = scribe_groups.named_topics(p)
    sizes = scribe_groups.group_sizes(p)
    counts = spark_groups.chunk_counts(sizes, p.nodes, p.seed)
    # each topic's publisher: a random node (it publishes the topic's one event)
    publisher = stream(p.seed, Purpose.PUBLISHERS, p.nodes).integers(0, p.nodes, p.topics)
    creator = None
    if p.topic_root != "hash":   # topicIds carry the creator's nodeId prefix: the creator is the root
        creator = (publisher if p.topic_root == "creator_publisher"
                   else spark_groups.picked_members(spark, counts, p.nodes, p.seed))
        topics = rooted_at(topics, ring, creator, p.seed)
    forged = spark_groups.forged_requests(spark, int(round(p.bad_credentials * int(sizes.sum()))), p.topics,
                                          p.nodes, p.seed).localCheckpoint()
    genuine = spark_groups.members(spark, counts, p.nodes, p.seed)
    acl = tp.acl_frame(spark, topics)   # the credentials as the rooted topics have them
    subs, refused_sub = tp.admit_frame(spark_groups.with_credentials(acl, genuine, forged), acl)
    pubs = spark_groups.with_credentials(acl, spark_groups.topic_frame(spark, p.topics),
                                         forged.select(TOPIC, F.lit(0).cast("long").alias(NODE)))
    published, refused_pub = tp.admit_frame(pubs, acl)
    bsp.release(forged)   # the admitted frames are checkpointed: nothing reads the forged requests again
    n_subs = subs.count()
    run.log(f"{p.topics} topics, {n_subs} subscriptions accepted, {refused_sub} subscribe and "
            f"{refused_pub} publish requests refused (wrong credentials)")
    return _Workload(topics, subs, published, publisher, creator, n_subs, refused_sub, refused_pub)


def _measure(spark, p: ScribeParams, run: Run, overlay, routers, trees, w: _Workload) -> tuple[dict, str]:
    """Publish one event per topic; measure delay penalty, node stress, tree shape, link stress on routers."""
    t0 = time.time()
    # publish: each topic's publisher routes its event to the root ...
    to_root = ov.route(overlay, ov.messages_frame(spark, w.publisher, w.topics.hi, w.topics.lo))
    to_root = to_root.toPandas().sort_values("mid")
    roots = trees.roots.toPandas().set_index(TOPIC).node
    if not (to_root.dest.to_numpy() == roots.reindex(range(p.topics)).to_numpy()).all():
        raise RuntimeError("a PUBLISH routed to a node other than its topic's root")
    naming = "topicId = SHA-1(name || creator)"
    if w.creator is not None:
        at_creator = int((roots.reindex(range(p.topics)).to_numpy() == w.creator).sum())
        naming = (f"topicId = the creator's nodeId prefix then SHA-1(name) (`topic_root = {p.topic_root}`); "
                  f"{at_creator:,} of {p.topics:,} roots are their creator")
        run.log(naming)
    lap = _Lap(run, t0)
    lap("publications routed to the roots")
    # ... and the root sends it down the tree
    paths = metrics.tree_paths(overlay, trees)
    lap("publications sent down the trees")
    live = w.published.select(TOPIC)  # only accepted publications are disseminated
    delay = metrics.delay_penalty(overlay, trees, paths.join(live, TOPIC), w.subs)
    delay = delay.toPandas().sort_values(TOPIC)
    leg = pd.DataFrame({TOPIC: np.arange(p.topics), "publisher_to_root_ms": to_root.distance.to_numpy(),
                        "publisher_to_root_hops": to_root.hops.to_numpy()})
    delay = delay.merge(leg, on=TOPIC, how="left")
    lap("delay penalty")
    stress = metrics.node_stress_counts(trees).toPandas()   # counts per value: not a row per node
    shape = metrics.tree_shape(trees, paths).toPandas().sort_values(TOPIC)
    lap("node stress and tree shape")
    tables = {**_delay_table(delay), **_node_stress(p, stress), "tree_shape": shape}
    if routers is not None:   # link stress counts copies on router-to-router links: only routers have them
        links = metrics.link_stress(overlay, routers, trees, w.subs.join(live, TOPIC))
        lap("link stress")
        tables.update(_link_stress(links, len(routers.edges)))
    return tables, naming


class _Lap:
    """Log the seconds each part of a phase took."""

    def __init__(self, run: Run, t0: float) -> None:
        self.run, self.t = run, t0

    def __call__(self, what: str) -> None:
        now = time.time()
        self.run.log(f"{what} ({now - self.t:.1f}s)")
        self.t = now


def _hex(ring, nodes):
    return ids.to_hex(ring.hi[nodes], ring.lo[nodes])


def _save_trees(trees, subs, ring, topics, run: Run) -> None:
    """Write the trees, the subscriptions and the nodes, streamed a partition (or a ring block) at a time:
    the driver never holds a row per edge or per node."""
    thex = ids.to_hex(topics.hi, topics.lo)

    def topic(b: pa.RecordBatch) -> np.ndarray:
        return thex[b.column(TOPIC).to_numpy()]

    def node(b: pa.RecordBatch, col: str) -> np.ndarray:
        return _hex(ring, b.column(col).to_numpy())
    text = pa.string()
    arrow.frame_to_parquet(trees.edges.select(TOPIC, SRC, DST).orderBy(TOPIC, SRC), run.path("trees.parquet"),
                           pa.schema([("topic", text), ("child", text), ("parent", text)]),
                           lambda b: {"topic": topic(b), "child": node(b, SRC), "parent": node(b, DST)})
    arrow.frame_to_parquet(subs.select(TOPIC, NODE).orderBy(TOPIC, NODE), run.path("subscriptions.parquet"),
                           pa.schema([("topic", text), ("node", text)]),
                           lambda b: {"topic": topic(b), "node": node(b, NODE)})
    site = "router" if ring.prox.model == "transit-stub" else "site"
    arrow.write_parquet(run.path("nodes.parquet"), overlays.node_tables(ring, site))


def _delay_table(delay: pd.DataFrame) -> dict[str, pd.DataFrame]:
    names = {"max_scribe": "max_delay_scribe_ms", "max_ip": "max_delay_ip_ms",
             "mean_scribe": "mean_delay_scribe_ms", "mean_ip": "mean_delay_ip_ms"}
    cols = [TOPIC, "members", "rmd", "rad", *names, "publisher_to_root_ms", "publisher_to_root_hops"]
    return {"delay": delay[cols].rename(columns=names)}


def _node_stress(p: ScribeParams, counts: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Node stress in all: topics forwarded and children-table entries per node, and their distributions,
    from how many nodes have each value (`metrics.node_stress_counts`)."""
    n, rows, dist = p.nodes, [], []
    for key, label in (("topics", "topics_forwarded"), ("entries", "children_entries")):
        d = counts[counts.metric == key].sort_values("value")
        vals, cnt = d["value"].to_numpy(np.int64), d["nodes"].to_numpy(np.int64)
        nonzero, total = int(cnt.sum()), int((vals * cnt).sum())
        rows.append({"metric": label, "mean_all_nodes": total / n,
                     "mean_nonzero": total / nonzero if nonzero else 0.0,
                     "max": int(vals.max()) if nonzero else 0, "nodes_nonzero": nonzero, "nodes": n})
        dist.append(pd.DataFrame({"metric": label, "value": np.concatenate([[0], vals]),
                                  "nodes": np.concatenate([[n - nonzero], cnt])}))
    return {"node_stress": pd.DataFrame(rows), "node_stress_distribution": pd.concat(dist)}


def _link_stress(links: dict, n_links: int) -> dict[str, pd.DataFrame]:
    """Copies of one event per topic on each physical link, per scheme, and their distribution."""
    rows, dist = [], []
    for scheme, df in links.items():
        c = df.copies.to_numpy()
        rows.append({"scheme": scheme, "mean": c.mean() if len(c) else 0.0,
                     "max": int(c.max()) if len(c) else 0, "links_used": len(c), "links_total": n_links,
                     "total_copies": int(c.sum())})
        vals, cnt = np.unique(c, return_counts=True)
        dist.append(pd.DataFrame({"scheme": scheme, "copies": vals, "links": cnt}))
    return {"link_stress": pd.DataFrame(rows), "link_stress_distribution": pd.concat(dist)}


def report(outcome: Outcome, p: ScribeParams, run: Run) -> None:
    """Plot the delay penalty, node and link stress and tree depth; write the summary."""
    t = outcome.tables
    delay, shape = t["delay"], t["tree_shape"]
    at = f"\n{p.nodes:,} nodes, {p.topics:,} topics" + (f" of {p.group_size}" if p.group_size else "")
    with plots.figure(run.path("delay_penalty_cdf.png"), "Delay penalty of Scribe vs IP unicast" + at,
                      "delay penalty (Scribe / IP)", "cumulative fraction of topics") as ax:
        valid = delay.dropna(subset=["rmd", "rad"])
        for col, label in (("rmd", "RMD (max delay)"), ("rad", "RAD (mean delay)")):
            plots.cdf(ax, valid[col].to_numpy(), label=label)
    with plots.figure(run.path("node_stress.png"), "Children-table entries per node" + at,
                      "children-table entries", "number of nodes") as ax:
        d = t["node_stress_distribution"]
        d = d[d.metric == "children_entries"]
        top = int(d.value.max())   # whole numbers: one bin per value while they are few
        ax.hist(d.value, bins=np.arange(top + 2) - 0.5 if top < 100 else 50, weights=d.nodes, log=True)
    if "link_stress_distribution" in t:
        _plot_link_stress(t["link_stress_distribution"], at, run)
    with plots.figure(run.path("tree_depth.png"), "Scribe tree depth" + at, "depth (overlay hops)",
                      "number of topics") as ax:
        ax.hist(shape.depth, bins=np.arange(shape.depth.max() + 2) - 0.5)
    _summary(outcome, p, run)


def _plot_link_stress(dist: pd.DataFrame, at: str, run: Run) -> None:
    """Histogram of copies per router link, per scheme."""
    with plots.figure(run.path("link_stress.png"), "Link stress, one event per topic" + at,
                      "copies of the event on a link", "number of links") as ax:
        for scheme, d in dist.groupby("scheme", sort=False):
            if len(d):
                bins = np.unique(np.geomspace(1, d.copies.max() + 1, 40).astype(int))
                ax.hist(d.copies, bins=bins, weights=d.links, histtype="step", label=scheme, log=True)
        ax.set_xscale("log")


def _network(p: ScribeParams) -> tuple[str, str, str]:
    """The summary's words for the network and what IP means on it."""
    if p.proximity == "transit-stub":
        return (f"on a transit-stub network of {p.topology.routers:,} routers", "ms",
                "IP multicast is the shortest-path tree from the root's router; link stress counts "
                "router-to-router links only.")
    unit = {"plane": "plane units", "sphere": "radians", "matrix": "ms"}[p.proximity]
    return (f"under the {p.proximity} proximity model", unit,
            f"IP is the direct distance; delays are in {unit} (the delay_*_ms columns too); there are no "
            "router links, so no link stress.")


def _summary(outcome: Outcome, p: ScribeParams, run: Run) -> None:
    t, notes = outcome.tables, outcome.notes
    delay, node_stress, shape = (t[k] for k in ("delay", "node_stress", "tree_shape"))
    link_stress = t.get("link_stress", pd.DataFrame(columns=["scheme"]))
    valid = delay.dropna(subset=["rmd", "rad"])
    headline = pd.DataFrame([
        {"metric": "RMD median / mean / max",
         "value": f"{valid.rmd.median():.2f} / {valid.rmd.mean():.2f} / {valid.rmd.max():.2f}"},
        {"metric": "RAD median / mean / max",
         "value": f"{valid.rad.median():.2f} / {valid.rad.mean():.2f} / {valid.rad.max():.2f}"},
        {"metric": "children entries per node: mean (all nodes) / max",
         "value": f"{node_stress.mean_all_nodes[1]:.2f} / {node_stress['max'][1]}"},
        {"metric": "topics forwarded per node: mean (all nodes) / max",
         "value": f"{node_stress.mean_all_nodes[0]:.2f} / {node_stress['max'][0]}"},
        *[{"metric": f"link stress {r.scheme}: mean / max (links used)",
           "value": f"{r.mean:.2f} / {r.max} ({r.links_used} of {r.links_total})"}
          for r in link_stress.itertuples()],
        {"metric": "tree depth: mean / max", "value": f"{shape.depth.mean():.2f} / {shape.depth.max()}"},
        {"metric": "root fan-out: mean / max",
         "value": f"{shape.root_fanout.mean():.2f} / {shape.root_fanout.max()}"},
        {"metric": "requests refused (wrong credentials): subscribe / publish",
         "value": f"{notes['subscribe_refused']} / {notes['publish_refused']}"},
    ])
    sizes = ("group size %d" % p.group_size if p.group_size
             else f"size of rank r = floor(N r^-{p.size_exponent} + 0.5)")
    network, unit, ip = _network(p)
    run.path("summary.md").write_text(
        f"# {run.name}\n\n{p.nodes:,} Scribe nodes {network}, {p.topics:,} topics ({sizes}; "
        f"{notes['naming']}), {notes['subscriptions']:,} subscriptions, {notes['edges']:,} tree edges, "
        f"seed {p.seed}.\n"
        "Each topic's event is published by a random node, routed to the root (mean "
        f"{delay.publisher_to_root_ms.mean():.1f} {unit}, {delay.publisher_to_root_hops.mean():.2f} hops; "
        "`publisher_to_root_*` in delay.csv), then sent down the tree. RMD and RAD compare the delays from "
        f"the root, as the Scribe paper does; {ip}\n" + overlays.described(p) + "\n"
        + plots.markdown_table(headline) + "\n\nTimings (s): "
        + ", ".join(f"{k} {v:.1f}" for k, v in notes["seconds"].items()) + "\n")
