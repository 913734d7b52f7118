"""Parameter loading: every bad input is one clear line naming the key, and nothing is written."""
import subprocess
import sys
import tomllib

import pytest

from scribe_spark import loader
from scribe_spark.config import ConfigError, PastryHopsParams
from tests.helpers import ROOT


def _load(tmp_path, text, overrides=()):
    f = tmp_path / "p.toml"
    f.write_text(text)
    return loader.load(PastryHopsParams, f, list(overrides))


def test_defaults_file_loads_and_round_trips(tmp_path):
    p = loader.load(PastryHopsParams, ROOT / "conf" / "pastry_hops.toml")
    assert p.nodes[-1] == 100_000 and p.lookups == 200_000 and p.b == 4
    again = _load(tmp_path, loader.to_toml(p))
    assert again == p


def test_overrides_are_toml_values(tmp_path):
    p = _load(tmp_path, "nodes = [10]\n", ["nodes=[1000,10000]", "proximity=transit-stub",
                                          "topology.edge_prob=0.5", "save_routes=true"])
    assert p.nodes == (1000, 10000) and p.proximity == "transit-stub" and p.topology.edge_prob == 0.5
    assert p.save_routes


@pytest.mark.parametrize("text, overrides, key, reason", [
    ("bogus = 1\n", [], "bogus", "unknown parameter"),
    ("", ["b=3"], "b", "one of 1, 2, 4, 8"),
    ("", ["b=16"], "b", "one of 1, 2, 4, 8"),
    ("", ["leaf_set=15"], "leaf_set", "even"),
    ("", ["nodes=[1]"], "nodes", "every value must be in 2.."),
    ("", ["nodes=[]"], "nodes", "must list at least 1 value"),
    ("", ["lookups=0"], "lookups", "must be in 1.."),
    ("", ["lookups=\"many\""], "lookups", "integer"),
    ("", ["b=true"], "b", "integer"),
    ("", ["proximity=moon"], "proximity", "one of"),
    ("", ["proximity=\"matrix\""], "matrix", "must name"),
    ("", ["proximity=\"matrix\"", "matrix=\"/nonexistent.npy\""], "matrix", "not found"),
    ("[topology]\nrouters=3\n", [], "topology.routers", "unknown"),
    ("", ["topology.edge_prob=2"], "topology.edge_prob", "[0, 1]"),
])
def test_bad_parameters_name_the_key(tmp_path, text, overrides, key, reason):
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, text, overrides)
    msg = str(e.value)
    assert f"'{key}'" in msg and reason in msg and "\n" not in msg


def test_matrix_must_cover_all_nodes(tmp_path):
    m = tmp_path / "m.txt"
    m.write_text("0 1 2\n1 0 1\n2 1 0\n")
    small = 'leaf_set = 2\nneighborhood = 1\n'
    p = _load(tmp_path, f'proximity = "matrix"\nmatrix = "{m}"\nnodes = [3]\n{small}')
    assert p.proximity == "matrix"
    with pytest.raises(ConfigError, match="'nodes'.*3 sites"):
        _load(tmp_path, f'proximity = "matrix"\nmatrix = "{m}"\nnodes = [4]\n{small}')
    bad = tmp_path / "bad.txt"
    bad.write_text("0 1\n1 0\n2 2\n")
    with pytest.raises(ConfigError, match="'matrix'.*square"):
        _load(tmp_path, f'proximity = "matrix"\nmatrix = "{bad}"\nnodes = [2]\n')


def test_invalid_toml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid TOML"):
        _load(tmp_path, "nodes = [\n")
    with pytest.raises(ConfigError, match="not found"):
        loader.load(PastryHopsParams, tmp_path / "nope.toml")


def test_job_rejects_bad_input_with_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, str(ROOT / "jobs" / "pastry_hops.py"), "--set", "b=3", "--out",
                          str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert lines == ["pastry_hops: error: key 'b': must be one of 1, 2, 4, 8 (got 3)"]
    assert not out.exists()


def test_resolved_params_are_valid_toml():
    text = loader.to_toml(PastryHopsParams())
    data = tomllib.loads(text)
    assert data["nodes"] == list(PastryHopsParams().nodes) and data["topology"]["transit_domains"] == 10


@pytest.mark.parametrize("overrides, key", [
    (["topics=0"], "topics"), (["group_size=20", "nodes=10"], "group_size"), (["nodes=1"], "nodes"),
    (["min_size=0"], "min_size"), (["bad_credentials=2.0"], "bad_credentials"), (["b=5"], "b"),
])
def test_bad_scribe_workloads_name_the_key(overrides, key):
    from scribe_spark.config import ScribeParams
    with pytest.raises(ConfigError, match=f"'{key}'"):
        loader.load(ScribeParams, ROOT / "conf" / "scribe_multicast.toml", overrides)


def test_every_shipped_config_loads_and_means_what_it_says(tmp_path):
    """Each file under conf/ loads as its job's parameters, with every key it sets taking effect."""
    from scribe_spark.experiments import registry
    files = sorted((ROOT / "conf").rglob("*.toml"))
    assert {f.stem for f in files} == set(registry.JOBS)
    for f in files:
        cls = registry.JOBS[f.stem].params
        p = loader.load(cls, f)
        assert type(p) is cls, f
        written = tmp_path / f"{f.parent.name}-{f.name}"
        written.write_text(loader.to_toml(p))
        assert loader.load(cls, written) == p, f              # what a run saves reloads to the same run
        raw = tomllib.loads(f.read_text())
        for key, value in raw.items():                        # no key silently ignored or changed
            got = getattr(p, key)
            if isinstance(value, dict):
                assert all(getattr(got, k) == (tuple(v) if isinstance(v, list) else v)
                           for k, v in value.items()), (f, key)
            else:
                assert got == (tuple(value) if isinstance(value, list) else value), (f, key)


@pytest.mark.parametrize("overrides, key", [
    (["topics_per_client=[0]"], "topics_per_client"), (["topics_per_client=[2000]"], "topics_per_client"),
    (["popularity=[\"flat\"]"], "popularity"), (["clients=0"], "clients"),
])
def test_bad_tno_parameters_name_the_key(overrides, key):
    from scribe_spark.config import TnoSizeParams
    with pytest.raises(ConfigError, match=f"'{key}'"):
        loader.load(TnoSizeParams, ROOT / "conf" / "tno_timestamp_size.toml", overrides)


@pytest.mark.parametrize("overrides, key", [
    (["rates=[0.0]"], "rates"), (["precedence=\"random\""], "precedence"), (["duration_s=0.5"], "duration_s"),
    (["servers=2000"], "servers"), (["service_sweep_ms=[-1.0]"], "service_sweep_ms"),
])
def test_bad_sequencer_parameters_name_the_key(overrides, key):
    from scribe_spark.config import TnoSequencerParams
    with pytest.raises(ConfigError, match=f"'{key}'"):
        loader.load(TnoSequencerParams, ROOT / "conf" / "tno_sequencer.toml", overrides)


def test_jobs_folder_holds_one_entry_point_per_registered_job():
    """`run.sh` lists jobs/*.py: each is the registry's job of its name, and every job has one; jobs/tour.py
    runs the quick tour."""
    from scribe_spark.experiments import registry
    entry = {f.stem: f.read_text() for f in (ROOT / "jobs").glob("*.py")}
    assert set(entry) == set(registry.JOBS) | {"tour"}
    for name, text in entry.items():
        assert (f'run_job("{name}")' in text) != (name == "tour"), name
