"""A run stopped by Ctrl-C, by SIGTERM or by a full disk ends in one line and resumes to the tables of an
uninterrupted run."""
import os
import re
import signal
import subprocess
import time

import pytest

from tests.helpers import ROOT, tables

# any sweep would do: this one's points are short (6, a Spark job or two each), so that the tests spend
# their time on what they test, the stops and the resumes, not on simulating
JOB = "tno_timestamp_size"
TINY = [JOB, "--conf", f"conf/tiny/{JOB}.toml"]   # 2 popularity models x 3 topics_per_client


def _run_sh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["./run.sh", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def _stop_after(out, points: int, how: str, *extra: str) -> subprocess.CompletedProcess:
    """Start (or resume) the tiny sweep; once `points` points are saved, stop it as a terminal's Ctrl-C
    (SIGINT to the whole group) or `kill PID` (SIGTERM to run.sh alone) would."""
    proc = subprocess.Popen(["./run.sh", *TINY, "--out", str(out), *extra], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 300
    while len(list(out.glob(f".{JOB}.tmp-*/.points/*.pkl"))) < points:
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.1)
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        os.kill(proc.pid, signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def _one_line(res: subprocess.CompletedProcess, out, said: str) -> int:
    """The stop's only line on stderr; return the points it says were kept."""
    (line,) = res.stderr.splitlines()
    kept = re.match(rf"{JOB}: error: {said}; (\d) points kept in {out}/\.{JOB}\.tmp-", line)
    assert kept and line.endswith(f"continue with: ./run.sh {JOB} --conf conf/tiny/{JOB}.toml "
                                  f"--out {out} --resume"), line
    assert "Traceback" not in res.stdout and not (out / JOB).exists()
    return int(kept[1])


@pytest.mark.slow
def test_ctrl_c_then_sigterm_each_end_in_one_line_and_the_run_resumes_to_the_same_tables(tiny, tmp_path):
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
    assert tables(out / JOB) == tables(tiny(JOB))


@pytest.mark.slow
def test_a_full_disk_ends_in_one_line_and_the_run_resumes_once_there_is_room(tiny, tmp_path):
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
        assert line.startswith(f"{JOB}: error: no space left on the disk of ") and "points kept" in line
        assert not (out / JOB).exists()
        filler.unlink()
        resumed = _run_sh(*TINY, "--out", str(out), "--resume")
        assert resumed.returncode == 0, resumed.stderr
        assert tables(out / JOB) == tables(tiny(JOB))
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
