"""A sweep killed between points continues with --resume and gives the tables of an uninterrupted run."""
import os
import signal
import subprocess
import time

import pyarrow.parquet as pq
import pytest

from scribe_spark import cli
from scribe_spark.cli import folder
from tests.helpers import ROOT, closest_brute, tables

TINY = ["pastry_hops", "--conf", "conf/tiny/pastry_hops.toml"]   # nodes [300, 900] x 2 modes, save_routes


def _run_sh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["./run.sh", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_killed_sweep_resumes_to_the_uninterrupted_tables(tiny, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen(["./run.sh", *TINY, "--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 300
    while not list(out.glob(".pastry_hops.tmp-*/.points/*.pkl")):   # the first point is saved ...
        assert proc.poll() is None and time.time() < deadline, \
            proc.stdout.read() if proc.poll() is not None else ""
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)   # ... kill -9 the launcher, the JVM and the Python driver
    first = proc.communicate()[0]
    while any(folder.alive(d) for d in out.glob(".pastry_hops.tmp-*")) and time.time() < deadline:
        time.sleep(0.2)   # the orphaned Python driver takes a moment to die
    assert "WARNING: Using incubator modules" not in first
    assert "continue it with: ./run.sh pastry_hops --conf conf/tiny/pastry_hops.toml --out" in first
    unfinished = list(out.glob(".pastry_hops.tmp-*"))
    assert len(unfinished) == 1 and not (out / "pastry_hops").exists()
    kept = len(list((unfinished[0] / ".points").glob("*.pkl")))
    assert 1 <= kept < 6

    # other parameters are refused before Spark starts, and the unfinished run is left alone
    other = _run_sh(*TINY, "--set", "lookups=1400", "--out", str(out), "--resume")
    assert other.returncode == 2 and other.stdout == ""
    assert other.stderr.strip().splitlines() == [
        f"pastry_hops: error: --resume: the unfinished run {unfinished[0]} has other parameters (key "
        "'lookups' is 1500 there and 1400 here); run without --resume to start afresh"]
    assert list(out.glob(".pastry_hops.tmp-*")) == unfinished

    stale = out / ".pastry_hops.tmp-999999999"   # another dead run's folder: cleaned when a run completes
    stale.mkdir()
    resumed = _run_sh(*TINY, "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"({kept} points done)" in resumed.stdout
    assert resumed.stdout.count("taken from the interrupted run") == kept
    assert sorted(p.name for p in out.iterdir()) == ["pastry_hops"]   # no temporary folder left behind
    result = out / "pastry_hops"
    assert sorted(p.name for p in result.iterdir() if p.name.startswith(".")) == []
    assert tables(result) == tables(tiny("pastry_hops"))   # same as one uninterrupted run, byte for byte

    again = _run_sh(*TINY, "--out", str(out), "--resume")
    assert again.returncode == 0 and "already holds a complete run with these parameters" in again.stdout

    # independent check from the parquet files alone: every destination is the numerically closest node
    nodes = pq.read_table(result / "nodes.parquet").to_pandas()
    routes = pq.read_table(result / "routes.parquet").to_pandas()
    assert len(routes) == 2 * 2 * 1500
    for n in (300, 900):
        ints = sorted(int(h, 16) for h in nodes[nodes.overlay_nodes == n].id)
        r = routes[routes.overlay_nodes == n]
        for key, dest in zip(r.key, r.destination):
            k = int(key, 16)
            assert int(dest, 16) == ints[closest_brute(ints, k)]
        assert all(len(h) == 32 for h in r.source)


def simulate(params, run):
    """This module as a stand-in experiment: no Spark, the declared tables empty ..."""
    from tests.helpers import empty_outcome
    return empty_outcome("pastry_hops")


def report(outcome, params, run) -> None:
    """... and one file of its own."""
    run.path("t.csv").write_text("x\n1\n")


def test_resume_with_no_unfinished_run_says_it_starts_afresh(tmp_path, monkeypatch, capsys):
    import dataclasses

    from scribe_spark.experiments import registry
    job = dataclasses.replace(registry.JOBS["pastry_hops"], module="tests.test_resume")
    monkeypatch.setitem(registry.JOBS, "pastry_hops", job)
    out = tmp_path / "typo"
    args = ["--conf", str(ROOT / "conf/tiny/pastry_hops.toml"), "--out", str(out), "--resume"]
    assert cli.main("pastry_hops", args) == 0
    assert f"--resume: no unfinished run of pastry_hops in {out}; starting afresh" in capsys.readouterr().out
    assert (out / "pastry_hops" / "t.csv").read_text() == "x\n1\n"
    # the saved parameters name the code and the command that runs them again, with the same digest
    saved = out / "pastry_hops" / "params.toml"
    head = saved.read_text().splitlines()[:4]
    assert head[2].startswith("# code: scribe-spark ")   # and its commit, in a git checkout
    assert head[3] == f"# rerun: ./run.sh pastry_hops --conf {saved}"
    assert cli.plan("pastry_hops", ["--conf", str(saved)]).digest == folder.digest_of(out / "pastry_hops")
    assert cli.main("pastry_hops", args) == 0   # now complete: nothing to do, and nothing said of afresh
    assert "starting afresh" not in capsys.readouterr().out


def test_a_resumed_run_names_the_code_of_its_earlier_points(tmp_path):
    earlier = tmp_path / "params.toml"
    earlier.write_text("# resolved parameters\n# digest: d\n# code: scribe-spark 0.1, git aaa\nnodes = 3\n")
    assert folder.code_lines(None, "scribe-spark 0.1, git bbb") == "# code: scribe-spark 0.1, git bbb\n"
    assert folder.code_lines(earlier, "scribe-spark 0.1, git aaa") == "# code: scribe-spark 0.1, git aaa\n"
    twice = folder.code_lines(earlier, "scribe-spark 0.1, git bbb")
    assert twice == ("# code before a --resume: scribe-spark 0.1, git aaa\n"
                     "# code: scribe-spark 0.1, git bbb\n")
    earlier.write_text(twice)   # resumed again with a third commit: both earlier codes stay named
    assert folder.code_lines(earlier, "scribe-spark 0.1, git ccc").splitlines() == [
        "# code before a --resume: scribe-spark 0.1, git aaa",
        "# code before a --resume: scribe-spark 0.1, git bbb", "# code: scribe-spark 0.1, git ccc"]


def test_the_earlier_code_is_named_only_when_the_unfinished_run_kept_points(tmp_path, monkeypatch):
    import dataclasses

    from scribe_spark.experiments import registry
    job = dataclasses.replace(registry.JOBS["pastry_hops"], module="tests.test_resume")
    monkeypatch.setitem(registry.JOBS, "pastry_hops", job)
    conf = ["--conf", str(ROOT / "conf/tiny/pastry_hops.toml")]
    digest = cli.plan("pastry_hops", conf).digest
    for points in (1, 0):
        out = tmp_path / f"points-{points}"
        dead = out / ".pastry_hops.tmp-1"   # no owner file: its process is gone
        (dead / folder.POINTS).mkdir(parents=True)
        for i in range(points):
            (dead / folder.POINTS / f"{i}.pkl").write_bytes(b"")
        (dead / "params.toml").write_text(f"# digest: {digest}\n# code: scribe-spark 0.0, git old\n")
        assert cli.main("pastry_hops", [*conf, "--out", str(out), "--resume"]) == 0
        saved = (out / "pastry_hops" / "params.toml").read_text()
        assert ("# code before a --resume: scribe-spark 0.0, git old\n" in saved) == (points > 0)
