"""The docs' cluster commands (docs/cluster.md), exactly as written, work, and give the tables of a local run.

bench/determinism.py compares every job on the standalone cluster (docs/performance.md, "Determinism").
"""
import os
import re
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from scribe_spark import cli
from tests.helpers import ROOT, tables


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes_under(folder: str) -> list[int]:
    """Pids whose command line or working directory mentions `folder` (daemons and executors)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            cmd = open(f"/proc/{d}/cmdline", "rb").read().decode(errors="replace")
            cwd = os.readlink(f"/proc/{d}/cwd")
        except OSError:
            continue
        if folder in cmd or cwd.startswith(folder):
            found.append(int(d))
    return found


def docs_cluster_commands() -> list[list[str]]:
    """The `./run.sh` lines of docs/cluster.md's block on a standalone cluster, comments dropped."""
    text = (ROOT / "docs" / "cluster.md").read_text()
    block = re.search(r"\*\*A standalone cluster on this machine\*\*.*?```bash\n(.*?)```", text,
                      re.S).group(1)
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.startswith("./run.sh")]


@pytest.mark.slow
@pytest.mark.cluster
def test_readme_cluster_commands_work_and_equal_a_local_run(spark, tmp_path):
    commands = docs_cluster_commands()
    assert [c[1] for c in commands] == ["cluster", "pastry_hops", "cluster", "cluster"]
    cluster_dir = tmp_path / "cluster"
    port = _free_port()
    env = {**os.environ, "SCRIBE_CLUSTER_DIR": str(cluster_dir), "SCRIBE_CLUSTER_PORT": str(port),
           "SCRIBE_CLUSTER_WEBUI": "0", "SCRIBE_WORKER_MEMORY": "2g", "SCRIBE_EXECUTOR_MEMORY": "1500m",
           "SCRIBE_DRIVER_MEMORY": "2g"}

    def sh(args):
        args = [a.replace("7077", str(port)) for a in args]
        return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    daemons, made = [], []
    try:
        started = sh(commands[0])
        daemons = [int(p.read_text()) for p in cluster_dir.glob("*.pid")]
        assert started.returncode == 0, started.stdout + started.stderr
        assert "2 workers" in started.stdout
        job = sh(commands[1])   # as the docs write it: default parameter file, default output folder
        assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
        assert "WARNING: Using incubator modules" not in job.stdout + job.stderr
        folder = Path(re.search(r"done: outputs in (\S+)", job.stdout).group(1))
        made.append(folder.parent)
        assert folder.parent.parent == ROOT / "data" / "out"
        local_args = [a for a in commands[1][2:] if not a.startswith("--master") and "spark://" not in a]
        assert cli.main("pastry_hops", local_args + ["--out", str(tmp_path / "local")]) == 0
        assert tables(folder) == tables(tmp_path / "local" / "pastry_hops")
        assert "running" in sh(commands[2]).stdout

        app_logs = list(cluster_dir.glob("work-worker*/app-*"))
        assert app_logs, "the cluster runs did not reach the workers"
    finally:
        stopped = sh(commands[3])
        for d in made:
            shutil.rmtree(d, ignore_errors=True)
        deadline = time.time() + 30
        while _processes_under(str(cluster_dir)) and time.time() < deadline:
            time.sleep(1)
        left = _processes_under(str(cluster_dir)) + [p for p in daemons if os.path.exists(f"/proc/{p}")]
        for pid in left:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
    assert stopped.returncode == 0 and len(daemons) == 3
    assert not left, f"processes left behind: {left}"
