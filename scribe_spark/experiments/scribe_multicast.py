"""Experiments scribe_multicast (SPEC S1) and scribe_small_groups (S2).

Scribe trees on a transit-stub network next to IP multicast on the same routers: delay
penalty (RMD, RAD), node stress, link stress and tree shape.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from scribe_spark import bsp, ids, report
from scribe_spark.cli import Run
from scribe_spark.config import ScribeParams
from scribe_spark.pastry import overlay as ov
from scribe_spark.scribe import metrics
from scribe_spark.scribe import topics as tp
from scribe_spark.scribe import trees as tr
from scribe_spark.scribe.trees import NODE, SRC, TOPIC
from scribe_spark.session import spark_session
from scribe_spark.workloads.network import make_ring, shared_network
from scribe_spark.workloads.scribe_groups import creators, requests, rooted_at


def run(p: ScribeParams, run: Run) -> None:
    """Build all Scribe trees, measure them against IP multicast, write tables and plots."""
    spark = spark_session(run.name)
    t = {}
    t0 = time.time()
    routers, _ = shared_network(p, p.seed)
    run.log(f"transit-stub network: {routers.n_routers} routers, {len(routers.edges)} links")
    ring = make_ring(p.nodes, p, np.random.default_rng([p.seed, p.nodes]), routers)
    overlay = ov.build_overlay(spark, ring, "proximity", seed=p.seed, partitions=p.partitions or None)
    t["state_build_s"] = time.time() - t0
    run.log(f"Pastry state for {p.nodes} nodes built ({t['state_build_s']:.1f}s)")

    rng = np.random.default_rng([p.seed, p.nodes, 2])
    topics, sub_topic, sub_node, (bad_topic, bad_node) = requests(p, rng)
    # each topic's publisher: a random node (it publishes the topic's one event)
    publisher = np.random.default_rng([p.seed, p.nodes, 3]).integers(0, p.nodes, p.topics)
    creator = None
    if p.topic_root != "hash":   # topicIds carry the creator's nodeId prefix: the creator is the root
        creator = creators(p, publisher, sub_topic, sub_node)
        topics = rooted_at(topics, ring, creator, p.seed)
    req_topic = np.concatenate([sub_topic, bad_topic])
    req_node = np.concatenate([sub_node, bad_node])
    cred = topics.cred_numbers()
    creds = np.concatenate([cred[sub_topic], tp.forged(cred[bad_topic])])
    subs, refused_sub = tp.admit(spark, topics, req_topic, req_node, creds)
    pub_topic = np.concatenate([np.arange(p.topics), bad_topic])
    pub_creds = np.concatenate([cred, tp.forged(cred[bad_topic])])
    published, refused_pub = tp.admit(spark, topics, pub_topic, np.zeros(len(pub_topic)), pub_creds)
    n_subs = subs.count()
    run.log(f"{p.topics} topics, {n_subs} subscriptions accepted, {refused_sub} subscribe and "
            f"{refused_pub} publish requests refused (wrong credentials)")

    t0 = time.time()
    trees = tr.subscribe(overlay, topics, subs)
    n_edges = bsp.rows(trees.edges)
    t["subscribe_s"] = time.time() - t0
    run.log(f"trees built: {n_edges} edges in {trees.supersteps} supersteps ({t['subscribe_s']:.1f}s)")

    t0 = time.time()
    # publish: each topic's publisher routes its event to the root ...
    to_root = ov.route(overlay,
                       ov.messages_frame(spark, publisher, topics.hi,
                                         topics.lo)).toPandas().sort_values("mid")
    roots = trees.roots.toPandas().set_index(TOPIC).node
    if not (to_root.dest.to_numpy() == roots.reindex(range(p.topics)).to_numpy()).all():
        raise RuntimeError("a PUBLISH routed to a node other than its topic's root")
    naming = "topicId = SHA-1(name || creator)"
    if creator is not None:
        at_creator = int((roots.reindex(range(p.topics)).to_numpy() == creator).sum())
        naming = (f"topicId = the creator's nodeId prefix then SHA-1(name) (`topic_root = {p.topic_root}`); "
                  f"{at_creator:,} of {p.topics:,} roots are their creator")
        run.log(naming)
    lap = _Lap(run, t0)
    lap("publications routed to the roots")
    # ... and the root sends it down the tree
    paths = metrics.tree_paths(overlay, trees)
    lap("publications sent down the trees")
    live = published.select(TOPIC)  # only accepted publications are disseminated
    delay = metrics.delay_penalty(overlay, trees, paths.join(live, TOPIC), subs).toPandas().sort_values(TOPIC)
    leg = pd.DataFrame({TOPIC: np.arange(p.topics), "publisher_to_root_ms": to_root.distance.to_numpy(),
                        "publisher_to_root_hops": to_root.hops.to_numpy()})
    delay = delay.merge(leg, on=TOPIC, how="left")
    lap("delay penalty")
    stress = metrics.node_stress(trees).toPandas()
    shape = metrics.tree_shape(trees, paths).toPandas().sort_values(TOPIC)
    lap("node stress and tree shape")
    links = metrics.link_stress(overlay, routers, trees, subs.join(live, TOPIC))
    lap("link stress")
    t["metrics_s"] = time.time() - t0
    run.log(f"metrics computed ({t['metrics_s']:.1f}s)")

    if p.save_trees:
        _save_trees(trees, subs, ring, topics, run)
    _write(p, run, delay, stress, shape, links, len(routers.edges), n_subs, n_edges,
           {"subscribe_refused": refused_sub, "publish_refused": refused_pub}, t, naming)
    overlay.unpersist()


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
    e = trees.edges.toPandas().sort_values([TOPIC, SRC]).reset_index(drop=True)
    s = subs.toPandas().sort_values([TOPIC, NODE]).reset_index(drop=True)
    thex = ids.to_hex(topics.hi, topics.lo)
    pq.write_table(pa.table({"topic": thex[e.topic.to_numpy()], "child": _hex(ring, e.src.to_numpy()),
                             "parent": _hex(ring, e.dst.to_numpy())}), run.path("trees.parquet"))
    pq.write_table(pa.table({"topic": thex[s.topic.to_numpy()], "node": _hex(ring, s.node.to_numpy())}),
                   run.path("subscriptions.parquet"))
    pq.write_table(pa.table({"id": _hex(ring, np.arange(ring.n)), "router": ring.prox.site}),
                   run.path("nodes.parquet"))


def _write(p, run: Run, delay, stress, shape, links, n_links, n_subs, n_edges, refused, t, naming) -> None:
    n = p.nodes
    report.write_csv(delay[[TOPIC, "members", "rmd", "rad", "max_scribe", "max_ip", "mean_scribe", "mean_ip",
                            "publisher_to_root_ms", "publisher_to_root_hops"]]
                     .rename(columns={"max_scribe": "max_delay_scribe_ms", "max_ip": "max_delay_ip_ms",
                                      "mean_scribe": "mean_delay_scribe_ms", "mean_ip": "mean_delay_ip_ms"}),
                     run.path("delay.csv"))
    ns_rows = []
    for col, label in (("topics", "topics_forwarded"), ("entries", "children_entries")):
        v = stress[col].to_numpy()
        ns_rows.append({"metric": label, "mean_all_nodes": v.sum() / n,
                        "mean_nonzero": v.mean() if len(v) else 0.0,
                        "max": int(v.max()) if len(v) else 0, "nodes_nonzero": len(v), "nodes": n})
    node_stress = pd.DataFrame(ns_rows)
    report.write_csv(node_stress, run.path("node_stress.csv"))
    dist = []
    for col, label in (("topics", "topics_forwarded"), ("entries", "children_entries")):
        vals, cnt = np.unique(stress[col].to_numpy(), return_counts=True)
        dist.append(pd.DataFrame({"metric": label, "value": np.concatenate([[0], vals]),
                                  "nodes": np.concatenate([[n - len(stress)], cnt])}))
    report.write_csv(pd.concat(dist), run.path("node_stress_distribution.csv"))
    ls_rows, ls_dist = [], []
    for scheme, df in links.items():
        c = df.copies.to_numpy()
        ls_rows.append({"scheme": scheme, "mean": c.mean() if len(c) else 0.0,
                        "max": int(c.max()) if len(c) else 0,
                        "links_used": len(c), "links_total": n_links, "total_copies": int(c.sum())})
        vals, cnt = np.unique(c, return_counts=True)
        ls_dist.append(pd.DataFrame({"scheme": scheme, "copies": vals, "links": cnt}))
    link_stress = pd.DataFrame(ls_rows)
    report.write_csv(link_stress, run.path("link_stress.csv"))
    report.write_csv(pd.concat(ls_dist), run.path("link_stress_distribution.csv"))
    report.write_csv(shape, run.path("tree_shape.csv"))
    timings = pd.DataFrame([{"phase": k, "seconds": round(v, 2)} for k, v in t.items()])
    report.write_csv(timings, run.path("timings.csv"))

    valid = delay.dropna(subset=["rmd", "rad"])
    at = f"\n{p.nodes:,} nodes, {p.topics:,} topics" + (f" of {p.group_size}" if p.group_size else "")
    with report.figure(run.path("delay_penalty_cdf.png"), "Delay penalty of Scribe vs IP unicast" + at,
                       "delay penalty (Scribe / IP)", "cumulative fraction of topics") as ax:
        for col, label in (("rmd", "RMD (max delay)"), ("rad", "RAD (mean delay)")):
            report.cdf(ax, valid[col].to_numpy(), label=label)
    with report.figure(run.path("node_stress.png"), "Children-table entries per node" + at,
                       "children-table entries", "number of nodes") as ax:
        v = stress.entries.to_numpy()
        top = int(v.max()) if len(v) else 0   # whole numbers: one bin per value while they are few
        bins = np.arange(top + 2) - 0.5 if top < 100 else 50
        ax.hist(np.concatenate([v, np.zeros(n - len(v), dtype=v.dtype)]), bins=bins, log=True)
    with report.figure(run.path("link_stress.png"), "Link stress, one event per topic" + at,
                       "copies of the event on a link", "number of links") as ax:
        for scheme, df in links.items():
            c = df.copies.to_numpy()
            if len(c):
                bins = np.unique(np.geomspace(1, c.max() + 1, 40).astype(int))
                ax.hist(c, bins=bins, histtype="step", label=scheme, log=True)
        ax.set_xscale("log")
    with report.figure(run.path("tree_depth.png"), "Scribe tree depth" + at, "depth (overlay hops)",
                       "number of topics") as ax:
        ax.hist(shape.depth, bins=np.arange(shape.depth.max() + 2) - 0.5)

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
           "value": f"{r.mean:.2f} / {r.max} ({r.links_used} of "
                    f"{r.links_total})"} for r in link_stress.itertuples()],
        {"metric": "tree depth: mean / max", "value": f"{shape.depth.mean():.2f} / {shape.depth.max()}"},
        {"metric": "root fan-out: mean / max",
         "value": f"{shape.root_fanout.mean():.2f} / {shape.root_fanout.max()}"},
        {"metric": "requests refused (wrong credentials): subscribe / publish",
         "value": f"{refused['subscribe_refused']} / {refused['publish_refused']}"},
    ])
    sizes = ("group size %d" % p.group_size if p.group_size
             else f"size of rank r = floor(N r^-{p.size_exponent} + 0.5)")
    run.path("summary.md").write_text(
        f"# {run.name}\n\n{n:,} Scribe nodes on a transit-stub network of {p.topology.routers:,} routers, "
        f"{p.topics:,} topics ({sizes}; {naming}), {n_subs:,} subscriptions, {n_edges:,} tree edges, "
        f"seed {p.seed}.\n"
        "Each topic's event is published by a random node, routed to the root (mean "
        f"{delay.publisher_to_root_ms.mean():.1f} ms, {delay.publisher_to_root_hops.mean():.2f} hops; "
        "`publisher_to_root_*` in delay.csv), then sent down the tree. RMD and RAD compare the delays from "
        "the root, as the Scribe paper does; IP multicast is the shortest-path tree from the root's "
        "router; link stress counts router-to-router links only.\n\n"
        + report.markdown_table(headline) + "\n\nTimings (s): "
        + ", ".join(f"{k} {v:.1f}" for k, v in t.items()) + "\n")
