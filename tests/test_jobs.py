"""End-to-end runs of whole jobs at small size."""
import subprocess
import tomllib

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from scribe_spark.config import PastryHopsParams
from scribe_spark.pastry.hops import run as pastry_hops
from tests.conftest import ROOT, run_quick

M = 1 << 128


@pytest.mark.slow
def test_pastry_hops_through_run_sh_writes_checkable_outputs(tmp_path):
    out = tmp_path / "out"
    res = subprocess.run(["./run.sh", "pastry_hops", "--conf", "conf/quick/pastry_hops.toml",
                          "--set", "nodes=[300,900]", "--set", "lookups=1500", "--set", "save_routes=true",
                          "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "superstep 1:" in res.stdout
    folder = out / "pastry_hops"
    assert sorted(p.name for p in out.iterdir()) == ["pastry_hops"]  # no temporary folder left behind
    for name in ("params.toml", "hops.csv", "hop_distribution.csv", "distance.csv", "summary.md",
                 "hops_vs_nodes.png", "hop_distribution.png", "relative_distance.png", "nodes.parquet",
                 "routes.parquet"):
        assert (folder / name).stat().st_size > 0, name
    params = tomllib.loads((folder / "params.toml").read_text())
    assert params["nodes"] == [300, 900] and params["lookups"] == 1500 and params["b"] == 4
    hops = pd.read_csv(folder / "hops.csv")
    assert list(hops.columns) == ["nodes", "lookups", "mean_hops", "max_hops", "log_2b_n"]
    assert list(hops.nodes) == [300, 900] and (hops.lookups == 1500).all()
    dist = pd.read_csv(folder / "hop_distribution.csv")
    assert np.allclose(dist.groupby("nodes").fraction.sum(), 1.0)
    rel = pd.read_csv(folder / "distance.csv")
    assert set(rel["mode"]) == {"proximity", "random"} and (rel.mean_relative_distance >= 1.0).all()

    # independent check from the parquet files alone: destination is the numerically closest node
    nodes = pq.read_table(folder / "nodes.parquet").to_pandas()
    routes = pq.read_table(folder / "routes.parquet").to_pandas()
    assert len(routes) == 2 * 2 * 1500
    for n in (300, 900):
        ints = sorted(int(h, 16) for h in nodes[nodes.overlay_nodes == n].id)
        r = routes[routes.overlay_nodes == n]
        for key, dest in zip(r.key, r.destination):
            k = int(key, 16)
            best = min(ints, key=lambda x: (min((x - k) % M, (k - x) % M), x))
            assert int(dest, 16) == best
        assert all(len(h) == 32 for h in r.source)


@pytest.mark.slow
def test_same_seed_gives_identical_tables(spark, tmp_path):
    sets = ["nodes=[400]", "lookups=800", 'proximity="transit-stub"', "topology.transit_domains=2",
            "topology.stubs_per_transit_router=2"]
    for name in ("a", "b"):
        run_quick("pastry_hops", PastryHopsParams, pastry_hops, tmp_path / name, *sets)
    for table in ("hops.csv", "hop_distribution.csv", "distance.csv"):
        a = (tmp_path / "a" / "pastry_hops" / table).read_text()
        assert a == (tmp_path / "b" / "pastry_hops" / table).read_text()


@pytest.mark.slow
def test_scribe_multicast_trees_check_out_from_parquet_alone(spark, tmp_path):
    from scribe_spark.config import ScribeParams
    from scribe_spark.scribe.multicast import run as scribe_multicast
    folder = run_quick("scribe_multicast", ScribeParams, scribe_multicast, tmp_path, "nodes=800", "topics=30",
                       "save_trees=true", "bad_credentials=0.01", "topology.transit_domains=3",
                       "topology.stubs_per_transit_router=3")
    for name in ("delay.csv", "node_stress.csv", "link_stress.csv", "tree_shape.csv", "summary.md",
                 "delay_penalty_cdf.png", "node_stress.png", "link_stress.png", "tree_depth.png"):
        assert (folder / name).stat().st_size > 0, name
    trees = pq.read_table(folder / "trees.parquet").to_pandas()
    subs = pq.read_table(folder / "subscriptions.parquet").to_pandas()
    nodes = pq.read_table(folder / "nodes.parquet").to_pandas()
    ints = [int(h, 16) for h in nodes.id]
    assert subs.groupby("topic").size().max() == 800 and subs.topic.nunique() == 30   # rank 1: everyone
    parent = {}
    for t, c, p in trees[["topic", "child", "parent"]].itertuples(index=False):
        assert (t, c) not in parent   # one parent per node and topic
        parent[(t, c)] = p
    for topic, group in subs.groupby("topic"):
        key = int(topic, 16)
        closest = min(ints, key=lambda x: (min((x - key) % M, (key - x) % M), x))
        ends = set()
        for node in group.node:
            seen = set()
            while (topic, node) in parent:
                assert node not in seen   # no cycles
                seen.add(node)
                node = parent[(topic, node)]
            ends.add(node)
        assert ends == {f"{closest:032x}"}   # one root per topic: the node closest to the topicId
    delay = pd.read_csv(folder / "delay.csv")
    assert len(delay) == 30 and (delay.rmd.dropna() >= 1.0 - 1e-9).all()
    assert (delay.publisher_to_root_ms >= 0).all() and delay.publisher_to_root_hops.max() <= 4
    ls = pd.read_csv(folder / "link_stress.csv").set_index("scheme")
    assert ls.loc["ip_multicast", "max"] <= 30   # at most one copy per topic on any link
    forged = round(0.01 * len(subs))   # every forged request is refused and counted, none applied
    assert f"| requests refused (wrong credentials): subscribe / publish | {forged} / {forged} |" in \
        (folder / "summary.md").read_text()


@pytest.mark.slow
def test_tno_ordering_job_checks_tno_over_scribe(spark, tmp_path):
    from scribe_spark.config import TnoOrderingParams
    from scribe_spark.tno.ordering_experiment import run as tno_ordering
    run_quick("tno_ordering", TnoOrderingParams, tno_ordering, tmp_path, "nodes=400", "clients=50", "topics=12",
              "events=300", "subscription_changes=6", "loss=0.05")
    t = pd.read_csv(tmp_path / "tno_ordering" / "ordering.csv").set_index("scenario")
    assert t.loc["tno", "violating_pairs"] == 0 and t.loc["tno", "undelivered"] == 0
    assert t.loc["tno", "out_of_order_tags"] == 0
    assert t.loc["tno_subscription_changes", "violating_pairs"] == 0
    assert t.loc["tno_subscription_changes", "undelivered"] == 0
    assert t.loc["no_ordering", "violating_pairs"] > 0     # the jittered Scribe ENS does reorder
    assert t.loc["tno_unreliable", "lost"] > 0 and t.loc["tno_unreliable", "out_of_order_tags"] > 0
    assert (tmp_path / "tno_ordering" / "buffering_delay_cdf.png").stat().st_size > 0
