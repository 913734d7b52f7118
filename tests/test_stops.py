"""A run stopped by Ctrl-C, by SIGTERM or by a full disk ends in one line, and one killed outright keeps its
points; each resumes to the tables of an uninterrupted run."""
import os
import re
import shlex
import signal
import subprocess
import time

import pytest

from scribe_spark.cli import folder
from tests.helpers import ROOT, tables

# any sweep would do: this one's points are short (a Spark job or two each), so that the tests spend their
# time on what they test, the stops and the resumes, not on simulating; 14 of them (2 popularity models x
# 7 topics_per_client), so that seconds of points are left after any stop
JOB = "tno_timestamp_size"
TINY = [JOB, "--conf", f"conf/tiny/{JOB}.toml", "--set", "topics_per_client=[1,2,3,5,8,12,20]"]
POINTS = 14


@pytest.fixture(scope="module")
def whole(spark, tmp_path_factory):
    """The tables of the sweep run without a stop (in this process)."""
    from scribe_spark import cli
    out = tmp_path_factory.mktemp("whole")
    args = [str(ROOT / a) if a.endswith(".toml") else a for a in TINY[1:]]
    assert cli.main(JOB, [*args, "--out", str(out)]) == 0
    return tables(out / JOB)


def _run_sh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["./run.sh", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def _stop_after(out, points: int, how: str, *extra: str) -> subprocess.CompletedProcess:
    """Start (or resume) the tiny sweep; once `points` points are saved, stop it as a terminal's Ctrl-C
    (SIGINT to the whole group), `kill PID` (SIGTERM to run.sh alone) or `kill -9` of the whole group
    (launcher, JVM and Python driver: nothing can clean up) would."""
    proc = subprocess.Popen(["./run.sh", *TINY, "--out", str(out), *extra], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 300
    while len(list(out.glob(f".{JOB}.tmp-*/.points/*.pkl"))) < points:
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.1)
    if how in ("ctrl-c", "sigkill"):
        os.killpg(proc.pid, signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
    else:
        os.kill(proc.pid, signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def _one_line(res: subprocess.CompletedProcess, out, said: str) -> int:
    """The stop's only line on stderr; return the points it says were kept."""
    (line,) = res.stderr.splitlines()
    kept = re.match(rf"{JOB}: error: {said}; (\d+) points kept in {out}/\.{JOB}\.tmp-", line)
    again = shlex.join(["./run.sh", *TINY, "--out", str(out), "--resume"])
    assert kept and line.endswith(f"continue with: {again}"), line
    assert "Traceback" not in res.stdout and not (out / JOB).exists()
    return int(kept[1])


@pytest.mark.slow
def test_ctrl_c_then_sigterm_each_end_in_one_line_and_the_run_resumes_to_the_same_tables(whole, tmp_path):
    out = tmp_path / "out"
    first = _stop_after(out, 1, "ctrl-c")
    assert first.returncode == 130
    kept = _one_line(first, out, "stopped by Ctrl-C")
    second = _stop_after(out, kept + 1, "sigterm", "--resume")
    assert second.returncode == 143 and f"({kept} points done)" in second.stdout
    kept = _one_line(second, out, "stopped by SIGTERM")
    resumed = _run_sh(*TINY, "--out", str(out), "--resume")
    assert resumed.returncode == 0 and resumed.stderr == "", resumed.stderr
    assert f"({kept} points done)" in resumed.stdout
    assert tables(out / JOB) == whole


@pytest.mark.slow
def test_a_full_disk_ends_in_one_line_and_the_run_resumes_once_there_is_room(whole, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
                      capture_output=True).returncode != 0:
        pytest.skip("this machine does not let the tests mount a small tmpfs")
    try:
        filler = disk / "filler"
        filler.write_bytes(b"\0" * (2 * 1024 * 1024 - 64 * 1024))   # room for the points, not for a plot
        out = disk / "out"
        full = _run_sh(*TINY, "--out", str(out))
        assert full.returncode == 4, full.stderr
        (line,) = full.stderr.splitlines()
        assert line.startswith(f"{JOB}: error: no space left on the disk of ")
        assert f"; {POINTS} points kept" in line
        assert not (out / JOB).exists()
        filler.unlink()
        resumed = _run_sh(*TINY, "--out", str(out), "--resume")
        assert resumed.returncode == 0, resumed.stderr
        assert tables(out / JOB) == whole
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


@pytest.mark.slow
def test_a_killed_sweep_keeps_its_points_refuses_other_parameters_and_resumes_alike(whole, tmp_path):
    out = tmp_path / "out"
    first = _stop_after(out, 1, "sigkill")
    deadline = time.time() + 60
    while any(folder.alive(d) for d in out.glob(f".{JOB}.tmp-*")) and time.time() < deadline:
        time.sleep(0.2)   # the orphaned Python driver takes a moment to die
    assert first.returncode == -signal.SIGKILL and not any(folder.alive(d) for d in out.glob(f".{JOB}.tmp-*"))
    assert "WARNING: Using incubator modules" not in first.stdout + first.stderr
    again = shlex.join(["./run.sh", *TINY, "--out", str(out), "--resume"])
    assert f"continue it with: {again}" in first.stdout
    unfinished = list(out.glob(f".{JOB}.tmp-*"))
    assert len(unfinished) == 1 and not (out / JOB).exists()
    kept = len(list((unfinished[0] / ".points").glob("*.pkl")))
    assert 1 <= kept < POINTS

    # other parameters are refused before Spark starts, and the unfinished run is left alone
    other = _run_sh(*TINY, "--set", "clients=400", "--out", str(out), "--resume")
    assert other.returncode == 2 and other.stdout == ""
    assert other.stderr.strip().splitlines() == [
        f"{JOB}: error: --resume: the unfinished run {unfinished[0]} has other parameters (key "
        "'clients' is 500 there and 400 here); run without --resume to start afresh"]
    assert list(out.glob(f".{JOB}.tmp-*")) == unfinished

    stale = out / f".{JOB}.tmp-999999999"   # another dead run's folder: cleaned when a run completes
    stale.mkdir()
    resumed = _run_sh(*TINY, "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"({kept} points done)" in resumed.stdout
    assert resumed.stdout.count("taken from the interrupted run") == kept
    assert sorted(p.name for p in out.iterdir()) == [JOB]   # no temporary folder left behind
    assert not [p.name for p in (out / JOB).iterdir() if p.name.startswith(".")]
    assert tables(out / JOB) == whole   # same as one uninterrupted run, byte for byte

    done = _run_sh(*TINY, "--out", str(out), "--resume")
    assert done.returncode == 0 and "already holds a complete run with these parameters" in done.stdout
