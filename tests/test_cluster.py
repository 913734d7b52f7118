"""Every job runs unchanged on a Spark standalone cluster: same seed, same outputs as local[*]."""
import os
import socket
import subprocess
import time

import numpy as np
import pandas as pd
import pytest

from tests.conftest import ROOT

JOBS = {
    "pastry_hops": ["--set", "nodes=[1000,3000]", "--set", "lookups=5000"],
    "scribe_multicast": ["--set", "nodes=800", "--set", "topics=30", "--set", "topology.transit_domains=3",
                         "--set", "topology.stubs_per_transit_router=3"],
}


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


def _tables(folder):
    """Every CSV of a run except wall-clock timings."""
    return {p.name: pd.read_csv(p) for p in sorted(folder.glob("*.csv")) if p.name != "timings.csv"}


def _same(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return False
    for c in a.columns:
        if a[c].dtype.kind in "fi":
            if not np.allclose(a[c], b[c], rtol=1e-9, atol=1e-12, equal_nan=True):
                return False
        elif not (a[c].astype(str) == b[c].astype(str)).all():
            return False
    return True


@pytest.mark.slow
@pytest.mark.cluster
def test_jobs_on_standalone_cluster_equal_local_runs(tmp_path):
    cluster_dir = tmp_path / "cluster"
    port = _free_port()
    env = {**os.environ, "SCRIBE_CLUSTER_DIR": str(cluster_dir), "SCRIBE_CLUSTER_PORT": str(port),
           "SCRIBE_CLUSTER_WEBUI": "0", "SCRIBE_WORKER_MEMORY": "2g", "SCRIBE_EXECUTOR_MEMORY": "1500m",
           "SCRIBE_DRIVER_MEMORY": "2g"}
    sh = lambda *args: subprocess.run(["./run.sh", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                                      timeout=900)
    daemons = []
    try:
        started = sh("cluster", "start")
        daemons = [int(p.read_text()) for p in cluster_dir.glob("*.pid")]
        assert started.returncode == 0, started.stdout + started.stderr
        assert "2 workers" in started.stdout
        for name, sets in JOBS.items():
            outs = {}
            for master in ("local[*]", f"spark://127.0.0.1:{port}"):
                out = tmp_path / ("local" if master.startswith("local") else "cluster-run")
                res = sh(name, "--conf", f"conf/quick/{name}.toml", "--out", str(out), "--master", master, *sets)
                assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
                outs[master] = _tables(out / name)
            local, cluster = outs.values()
            assert local.keys() == cluster.keys() and len(local) >= 3
            for table in local:
                assert _same(local[table], cluster[table]), (name, table)
        app_logs = list((cluster_dir / "work-worker1").glob("app-*")) + list((cluster_dir / "work-worker2").glob("app-*"))
        assert app_logs, "the cluster runs did not reach the workers"
    finally:
        stopped = sh("cluster", "stop")
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
