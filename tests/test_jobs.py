"""End-to-end runs of whole jobs at small size."""
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.helpers import ROOT, adaptive_execution_off, closest_brute


@pytest.mark.slow
def test_pastry_hops_routes_check_out_from_parquet_alone(tiny):
    """Every saved route, in both modes and at both sizes, ends at the numerically closest node."""
    folder = tiny("pastry_hops")   # nodes [300, 900], 1500 lookups, save_routes
    nodes = pq.read_table(folder / "nodes.parquet").to_pandas()
    routes = pq.read_table(folder / "routes.parquet").to_pandas()
    assert len(routes) == 2 * 2 * 1500
    for n in (300, 900):
        ints = sorted(int(h, 16) for h in nodes[nodes.overlay_nodes == n].id)
        r = routes[routes.overlay_nodes == n]
        assert len(ints) == n and len(r) == 2 * 1500
        assert all(int(d, 16) == ints[closest_brute(ints, int(k, 16))] for k, d in zip(r.key, r.destination))
        assert all(len(h) == 32 for h in r.source)


@pytest.mark.slow
def test_scribe_multicast_trees_check_out_from_parquet_alone(tiny):
    folder = tiny("scribe_multicast")   # 800 nodes, 30 topics, forged requests: 1% of the subscriptions
    for name in ("delay.csv", "node_stress.csv", "link_stress.csv", "tree_shape.csv", "summary.md",
                 "delay_penalty_cdf.png", "node_stress.png", "link_stress.png", "tree_depth.png"):
        assert (folder / name).stat().st_size > 0, name
    subs = _check_trees(folder)
    assert subs.groupby("topic").size().max() == 800 and subs.topic.nunique() == 30   # rank 1: everyone
    delay = pd.read_csv(folder / "delay.csv")
    assert len(delay) == 30 and (delay.rmd.dropna() >= 1.0 - 1e-9).all()
    assert (delay.publisher_to_root_ms >= 0).all() and delay.publisher_to_root_hops.max() <= 4
    ls = pd.read_csv(folder / "link_stress.csv").set_index("scheme")
    assert ls.loc["ip_multicast", "max"] <= 30   # at most one copy per topic on any link
    forged = round(0.01 * len(subs))   # every forged request is refused and counted, none applied
    assert f"| requests refused (wrong credentials): subscribe / publish | {forged} / {forged} |" in \
        (folder / "summary.md").read_text()


@pytest.mark.slow
def test_scribe_multicast_under_the_plane_model_measures_delay_against_direct_distances(spark, tmp_path):
    """proximity = plane: trees check out, delays are sums of plane distances, no link stress made up."""
    import numpy as np

    from scribe_spark import cli
    conf = tmp_path / "plane.toml"
    conf.write_text('proximity = "plane"\nnodes = 500\ntopics = 12\nsave_trees = true\nseed = 3\n')
    assert cli.main("scribe_multicast", ["--conf", str(conf), "--out", str(tmp_path)]) == 0
    folder = tmp_path / "scribe_multicast"
    subs = _check_trees(folder)
    assert not list(folder.glob("link_stress*"))
    assert "under the plane proximity model" in (folder / "summary.md").read_text()
    nodes = pq.read_table(folder / "nodes.parquet").to_pandas().set_index("id")
    xy = {i: np.array([x, y]) for i, x, y in nodes[["x", "y"]].itertuples()}
    trees = pq.read_table(folder / "trees.parquet").to_pandas()
    parent = {(t, c): p for t, c, p in trees[["topic", "child", "parent"]].itertuples(index=False)}
    topics = sorted(subs.topic.unique(), key=lambda h: -len(subs[subs.topic == h]))   # rank order
    delay = pd.read_csv(folder / "delay.csv").set_index("topic")
    for rank, topic in enumerate(topics):
        via_tree, direct = [], []
        for node in subs[subs.topic == topic].node:
            hop, d = node, 0.0
            while (topic, hop) in parent:
                d += float(np.linalg.norm(xy[hop] - xy[parent[(topic, hop)]]))
                hop = parent[(topic, hop)]
            via_tree.append(d)
            direct.append(float(np.linalg.norm(xy[node] - xy[hop])))
        row = delay.loc[rank]   # delay.csv holds six significant digits
        assert row.max_delay_scribe_ms == pytest.approx(max(via_tree), abs=0.006)
        assert row.max_delay_ip_ms == pytest.approx(max(direct), abs=0.006)
        assert row.mean_delay_scribe_ms == pytest.approx(np.mean(via_tree), abs=0.006)
        assert row.rmd == pytest.approx(max(via_tree) / max(direct), rel=1e-3)


def _check_trees(folder) -> pd.DataFrame:
    """Check the saved trees: one parent per (topic, node), no cycle, each topic's root the closest node."""
    trees = pq.read_table(folder / "trees.parquet").to_pandas()
    subs = pq.read_table(folder / "subscriptions.parquet").to_pandas()
    ints = [int(h, 16) for h in pq.read_table(folder / "nodes.parquet").to_pandas().id]
    parent = {}
    for t, c, p in trees[["topic", "child", "parent"]].itertuples(index=False):
        assert (t, c) not in parent   # one parent per node and topic
        parent[(t, c)] = p
    for topic, group in subs.groupby("topic"):
        key = int(topic, 16)
        closest = ints[closest_brute(ints, key)]
        ends = set()
        for node in group.node:
            seen = set()
            while (topic, node) in parent:
                assert node not in seen   # no cycles
                seen.add(node)
                node = parent[(topic, node)]
            ends.add(node)
        assert ends == {f"{closest:032x}"}   # one root per topic: the node closest to the topicId
    return subs


@pytest.mark.slow
def test_scribe_multicast_on_a_joined_overlay(tiny, tmp_path):
    """overlay = joined: trees still check out, on an overlay that is not the converged one."""
    from scribe_spark import cli
    conf = ROOT / "conf" / "tiny" / "scribe_multicast.toml"
    args = ["--conf", str(conf), "--set", "overlay=joined", "--set", "join_initial=200", "--set",
            "join_batch=600", "--set", "join_improve=rows", "--out", str(tmp_path)]
    assert cli.main("scribe_multicast", args) == 0
    folder = tmp_path / "scribe_multicast"
    _check_trees(folder)
    assert "grown by Pastry's join protocol: 200 nodes start converged" in (folder / "summary.md").read_text()
    joined = pq.read_table(folder / "trees.parquet").to_pandas()
    converged = pq.read_table(tiny("scribe_multicast") / "trees.parquet").to_pandas()
    assert set(map(tuple, joined[["topic", "child", "parent"]].to_numpy())) != \
        set(map(tuple, converged[["topic", "child", "parent"]].to_numpy()))


@pytest.mark.slow
def test_creator_rooted_topics_are_rooted_at_a_member(spark, tmp_path):
    """topic_root = creator_member: every topicId carries a member's id prefix and that member is the root."""
    from scribe_spark import cli
    conf = ROOT / "conf" / "tiny" / "scribe_multicast.toml"
    args = ["--conf", str(conf), "--set", "topic_root=creator_member", "--set", "nodes=300",
            "--set", "topics=12"]
    assert cli.main("scribe_multicast", args + ["--out", str(tmp_path)]) == 0
    folder = tmp_path / "scribe_multicast"
    trees = pq.read_table(folder / "trees.parquet").to_pandas()
    subs = pq.read_table(folder / "subscriptions.parquet").to_pandas()
    ints = [int(h, 16) for h in pq.read_table(folder / "nodes.parquet").to_pandas().id]
    for topic, group in subs.groupby("topic"):
        key = int(topic, 16)
        root = f"{ints[closest_brute(ints, key)]:032x}"
        assert root[:16] == topic[:16] and root in set(group.node)   # the creator: a member, and the root
        assert set(trees[trees.topic == topic].parent) - set(trees[trees.topic == topic].child) <= {root}
    assert "12 of 12 roots are their creator" in (folder / "summary.md").read_text()


@pytest.mark.slow
def test_tno_ordering_job_checks_tno_over_scribe(tiny):
    folder = tiny("tno_ordering")
    table = pd.read_csv(folder / "ordering.csv")
    sweep = table[table.scenario == "loss_sweep"].set_index("recovery")
    assert list(sweep.loss) == [0.05, 0.05] and (sweep.lost > 0).all()
    assert sweep.lost[True] == sweep.lost[False]                         # the same losses in both arms
    assert sweep.sequencer_resends[True] == sweep.sequencer_resends[False]
    assert sweep.recovered[True] > 0 and sweep.recovery_messages[False] == 0
    assert sweep.out_of_order_tags[True] < sweep.out_of_order_tags[False]
    both = table[table.scenario != "loss_sweep"].set_index(["chains", "scenario"])
    assert list(both.index.levels[0]) == ["etree", "literal"]
    # literal chains (group members only) may leave events buffered, but never notify out of order
    assert both.loc[("literal", "tno"), "violating_pairs"] == 0
    t = both.loc["etree"]
    assert t.loc["tno", "violating_pairs"] == 0 and t.loc["tno", "undelivered"] == 0
    assert t.loc["tno", "out_of_order_tags"] == 0
    assert t.loc["tno_subscription_changes", "violating_pairs"] == 0
    assert t.loc["tno_subscription_changes", "undelivered"] == 0
    assert t.loc["tno_dynamic_groups", "violating_pairs"] == 0
    assert t.loc["tno_dynamic_groups", "undelivered"] == 0
    # groups that follow subscriptions are never larger than the superset of every subscription
    changing = t.loc[["tno_subscription_changes", "tno_dynamic_groups"], "mean_timestamp_entries"]
    assert changing["tno_dynamic_groups"] <= changing["tno_subscription_changes"]
    assert t.loc["no_ordering", "violating_pairs"] > 0     # the jittered Scribe ENS does reorder
    assert t.loc["tno_unreliable", "lost"] > 0 and t.loc["tno_unreliable", "out_of_order_tags"] > 0
    assert (folder / "buffering_delay_cdf.png").stat().st_size > 0


def test_jobs_keep_adaptive_execution_on_whatever_the_defaults_say(spark):
    # the configuration the jobs are measured in (their tables are the same without it)
    from scribe_spark.spark.session import spark_session
    with adaptive_execution_off(spark):
        assert spark_session("test").conf.get("spark.sql.adaptive.enabled") == "true"


@pytest.mark.slow
def test_pastry_hops_on_a_joined_overlay_delivers_at_the_closest_node(tiny, tmp_path):
    """overlay = joined: every lookup still ends at the numerically closest node; routes differ."""
    from scribe_spark import cli
    conf = ROOT / "conf" / "tiny" / "pastry_hops.toml"
    args = ["--conf", str(conf), "--set", "nodes=[900]", "--set", "overlay=joined", "--set",
            "join_initial=500", "--set", "join_batch=400", "--out", str(tmp_path)]   # one batch of joins
    assert cli.main("pastry_hops", args) == 0
    folder = tmp_path / "pastry_hops"
    nodes = pq.read_table(folder / "nodes.parquet").to_pandas()
    routes = pq.read_table(folder / "routes.parquet").to_pandas()
    ints = sorted(int(h, 16) for h in nodes.id)
    assert set(routes.overlay_nodes) == {900} and len(ints) == 900
    assert all(int(d, 16) == ints[closest_brute(ints, int(k, 16))]
               for k, d in zip(routes.key, routes.destination))
    converged = pq.read_table(tiny("pastry_hops") / "routes.parquet").to_pandas()
    converged = converged[converged.overlay_nodes == 900]

    def distances(table, mode):
        return table[table["mode"] == mode].distance.to_numpy()
    assert (distances(routes, "random") == distances(converged, "random")).all()   # random: not joined
    assert (distances(routes, "proximity") != distances(converged, "proximity")).any()
