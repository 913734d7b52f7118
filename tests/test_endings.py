"""How a run ends: one line naming the cause, an exit code per kind, a stack trace only with --debug."""
import dataclasses
import errno
import signal

import pytest

from scribe_spark import cli
from scribe_spark.cli import endings
from scribe_spark.experiments import registry
from tests.helpers import ROOT


class Py4JJavaError(Exception):
    """Stands for py4j's exception carrying a Java one (its module is what `endings` looks at)."""


Py4JJavaError.__module__ = "py4j.protocol"


class Py4JNetworkError(Exception):
    pass


Py4JNetworkError.__module__ = "py4j.protocol"


@pytest.mark.parametrize("error, code, said", [
    (endings.Stopped(signal.SIGINT), 130, "stopped by Ctrl-C"),
    (endings.Stopped(signal.SIGTERM), 143, "stopped by SIGTERM"),
    (KeyboardInterrupt(), 130, "stopped by Ctrl-C"),
    (MemoryError(), 3, "the Python driver ran out of memory"),
    (OSError(errno.ENOSPC, "No space left on device", "/data/out/x.csv"), 4,
     "no space left on the disk of /data/out/x.csv"),
    (Py4JJavaError("An error occurred: java.io.IOException: No space left on device"), 4,
     "no space left in Spark's local folder"),
    (Py4JJavaError("java.lang.OutOfMemoryError: Java heap space"), 3, "Spark's JVM ran out of memory"),
    (Py4JJavaError("SparkException: All masters are unresponsive! Giving up."), 5,
     "master stopped answering"),
    (Py4JNetworkError("Answer from Java side is empty"), 3, "Spark's JVM stopped under the run"),
    (ValueError("a bug\nsecond line"), 1, "the simulator failed: ValueError: a bug (rerun with --debug"),
])
def test_each_kind_of_failure_has_its_line_and_code(error, code, said):
    end = endings.ending(error)
    assert end.code == code and said in end.cause and "\n" not in end.cause
    assert code in endings.CODES


def test_a_cause_below_a_python_exception_is_found():
    try:
        try:
            raise Py4JJavaError("java.lang.OutOfMemoryError: GC overhead limit exceeded")
        except Py4JJavaError as e:
            raise RuntimeError("collecting the routes failed") from e
    except RuntimeError as outer:
        assert endings.ending(outer).code == endings.EXIT_OUT_OF_MEMORY


def test_an_error_while_unwinding_from_a_signal_reads_as_the_signal():
    """A Ctrl-C that cuts a Spark call leaves the connection broken; the clean-up's next call fails."""
    try:
        try:
            raise endings.Stopped(signal.SIGINT)
        finally:
            raise Py4JNetworkError("An error occurred while calling o2372.getClass")
    except Py4JNetworkError as outer:
        assert endings.ending(outer) == endings.Ending(130, "stopped by Ctrl-C")


def simulate(params, run) -> None:
    """This module as a stand-in experiment: it fails after writing a file."""
    run.path("half.csv").write_text("x\n")
    raise ZeroDivisionError("division by zero\nin the middle of a sweep")


@pytest.mark.parametrize("debug", [False, True])
def test_a_failing_run_ends_in_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys, debug):
    job = dataclasses.replace(registry.JOBS["pastry_hops"], module="tests.test_endings")
    monkeypatch.setitem(registry.JOBS, "pastry_hops", job)
    monkeypatch.delenv("SCRIBE_RUN_DIR", raising=False)
    args = ["--conf", str(ROOT / "conf/tiny/pastry_hops.toml"), "--out", str(tmp_path / "out")]
    assert cli.main("pastry_hops", args + (["--debug"] if debug else [])) == endings.EXIT_INTERNAL
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == ("pastry_hops: error: the simulator failed: ZeroDivisionError: division by zero (rerun "
                       "with --debug for the stack trace); no sweep point had finished, so nothing was kept")
    assert (len(err) > 1 and err[0].startswith("Traceback")) if debug else len(err) == 1
    assert list((tmp_path / "out").iterdir()) == []   # the hidden folder is gone, nothing was published


def test_run_sh_hears_the_line_from_the_job_through_its_folder(tmp_path, monkeypatch, capsys):
    job = dataclasses.replace(registry.JOBS["pastry_hops"], module="tests.test_endings")
    monkeypatch.setitem(registry.JOBS, "pastry_hops", job)
    monkeypatch.setenv("SCRIBE_RUN_DIR", str(tmp_path))
    args = ["--conf", str(ROOT / "conf/tiny/pastry_hops.toml"), "--out", str(tmp_path / "out")]
    assert cli.main("pastry_hops", args) == endings.EXIT_INTERNAL
    assert capsys.readouterr().err == ""   # Spark would hand this process's stderr to its stdout
    code, line = (tmp_path / "status").read_text().splitlines()
    assert code == "1" and line.startswith("pastry_hops: error: the simulator failed: ZeroDivisionError")


def test_the_resume_hint_names_the_master_the_run_was_given(tmp_path, monkeypatch):
    """A run on a cluster continues there: the hint repeats --master unless it is run.sh's default."""
    from scribe_spark.cli import job
    argv = ["--conf", str(ROOT / "conf" / "tiny" / "pastry_hops.toml"), "--out", str(tmp_path)]
    monkeypatch.setenv("SCRIBE_MASTER", "local[*]")
    assert "--master" not in job.hint(job.plan("pastry_hops", argv))
    monkeypatch.setenv("SCRIBE_MASTER", "spark://127.0.0.1:7077")
    assert job.hint(job.plan("pastry_hops", argv)).endswith(
        f"--master spark://127.0.0.1:7077 --out {tmp_path} --resume")
