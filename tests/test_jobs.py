"""End-to-end runs of whole jobs at small size."""
import subprocess
import tomllib

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from scribe_spark import cli
from scribe_spark.config import PastryHopsParams
from scribe_spark.pastry.hops import run as pastry_hops
from tests.conftest import ROOT

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
    sets = ["--set", "nodes=[400]", "--set", "lookups=800", "--set", "proximity=\"transit-stub\"",
            "--set", "topology.transit_domains=2", "--set", "topology.stubs_per_transit_router=2"]
    for name in ("a", "b"):
        assert cli.main("pastry_hops", PastryHopsParams, pastry_hops,
                        ["--conf", str(ROOT / "conf/quick/pastry_hops.toml"), "--out", str(tmp_path / name)] + sets) == 0
    for table in ("hops.csv", "hop_distribution.csv", "distance.csv"):
        a = (tmp_path / "a" / "pastry_hops" / table).read_text()
        assert a == (tmp_path / "b" / "pastry_hops" / table).read_text()
