"""--resume where no run is unfinished, and the code a resumed run names (test_stops resumes real runs)."""
import pytest

from scribe_spark import cli
from scribe_spark.cli import folder
from tests.helpers import ROOT, tables


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


@pytest.mark.slow
def test_a_stopped_pastry_hops_sweep_resumes_to_the_tables_of_one_run(tiny, tmp_path, monkeypatch, capsys):
    """Stopped after the first size's points, the sweep takes them from the unfinished run (drawing no
    ring for that size) and computes the rest: the tables equal an uninterrupted run's, byte for byte."""
    from scribe_spark.experiments.run import Run
    args = ["--conf", str(ROOT / "conf/tiny/pastry_hops.toml"), "--out", str(tmp_path)]
    point, made = Run.point, []

    def stop_after_three(self, key, compute):
        if len(made) == 3:
            raise KeyboardInterrupt   # as Ctrl-C would, once the first size's three points are saved
        made.append(key)
        return point(self, key, compute)
    monkeypatch.setattr(Run, "point", stop_after_three)
    assert cli.main("pastry_hops", args) == 130
    assert made == ["nodes=300 mode=proximity", "nodes=300 mode=random", "nodes=300 ring"]
    monkeypatch.setattr(Run, "point", point)
    (unfinished,) = tmp_path.glob(".pastry_hops.tmp-*")
    unfinished.rename(tmp_path / ".pastry_hops.tmp-999999998")   # as another process's, gone
    capsys.readouterr()
    assert cli.main("pastry_hops", [*args, "--resume"]) == 0
    assert capsys.readouterr().out.count("taken from the interrupted run") == 3
    assert tables(tmp_path / "pastry_hops") == tables(tiny("pastry_hops"))
