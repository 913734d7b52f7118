"""Determinism check: every job, same seed, identical tables under every Spark layout.

    .venv/bin/python bench/determinism.py [--jobs pastry_hops ...] [--settings ref local1 local2 standalone]
                                          [--out data/bench/determinism]

Runs each job on conf/tiny/<job>.toml once per setting, all jobs of a setting in one
`spark-submit` (bench/one_driver.py), then compares every table (CSV bytes, Parquet rows;
timings.csv aside) against the first setting. Settings:

- ref: local[2], 2 shuffle partitions;
- local1: local[1], 3 shuffle partitions, `partitions = 3` for jobs that have the key;
- local2: local[2], 8 shuffle partitions (run.sh's default SCRIBE_SHUFFLE_PARTITIONS);
- standalone: the local standalone cluster (`./run.sh cluster start` on a free port, 2 workers
  of 1 core, one executor each), 8 shuffle partitions, `partitions = 5`.

Prints one line per (job, setting) and exits 1 if any table differs.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scribe_spark import loader  # noqa: E402
from scribe_spark.experiments.registry import JOBS  # noqa: E402
from scribe_spark.report import comparable_tables as tables  # noqa: E402

SETTINGS = {
    "ref": ("local[2]", 2, 0),
    "local1": ("local[1]", 3, 3),
    "local2": ("local[2]", 8, 0),
    "standalone": (None, 8, 5),
}


def has_partitions(name: str) -> bool:
    return any(f == "partitions" for f in JOBS[name].params.__dataclass_fields__)


def submit(master: str, shuffle: int, partitions: int, jobs: list[str], out: Path, extra: list[str]) -> float:
    """Run `jobs` in one spark-submit; return the wall seconds."""
    args = []
    for name in jobs:
        parts = ["--set", f"partitions={partitions}"] if partitions and has_partitions(name) else []
        args += [name] + parts + ["--"]
    venv = Path(sys.executable).parent
    cmd = [str(venv / "spark-submit"), "--master", master, *extra, "--driver-memory", "4g",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
           "--conf", f"spark.sql.shuffle.partitions={shuffle}",
           "--driver-java-options", f"-Dlog4j.configurationFile=file:{ROOT}/conf/spark/log4j2.properties",
           str(ROOT / "bench" / "one_driver.py"), str(out), *args]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    t0 = time.time()
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"{master}: failed\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return time.time() - t0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", nargs="+", default=list(JOBS), choices=list(JOBS))
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--out", default=str(ROOT / "data" / "bench" / "determinism"))
    args = ap.parse_args()
    for name in args.jobs:   # fail early on a tiny config that does not load
        loader.load(JOBS[name].params, ROOT / "conf" / "tiny" / f"{name}.toml")
    base = Path(args.out) / time.strftime("%Y%m%d-%H%M%S")
    results: dict[str, dict[str, dict[str, bytes]]] = {}
    for setting in args.settings:
        master, shuffle, partitions = SETTINGS[setting]
        out = base / setting
        if master is None:
            port = free_port()
            env = {**os.environ, "SCRIBE_CLUSTER_PORT": str(port), "SCRIBE_CLUSTER_WEBUI": "0",
                   "SCRIBE_CLUSTER_DIR": str(base / "cluster"), "SCRIBE_WORKER_MEMORY": "3g"}
            def sh(*a):
                return subprocess.run(["./run.sh", *a], cwd=ROOT, env=env, capture_output=True, text=True)
            started = sh("cluster", "start")
            if started.returncode:
                raise SystemExit(started.stdout + started.stderr)
            try:
                zip_path = sh("package").stdout.strip().splitlines()[-1]
                secs = submit(f"spark://127.0.0.1:{port}", shuffle, partitions, args.jobs, out,
                              ["--py-files", zip_path, "--executor-memory", "2500m"])
            finally:
                sh("cluster", "stop")
        else:
            secs = submit(master, shuffle, partitions, args.jobs, out, [])
        print(f"{setting}: {master or 'standalone'}, {shuffle} shuffle partitions, partitions={partitions}: "
              f"{len(args.jobs)} jobs in {secs:.0f}s", flush=True)
        results[setting] = {name: tables(out / name) for name in args.jobs}
    ref = args.settings[0]
    differ = 0
    print(f"\n| job | tables | {' | '.join(s for s in args.settings[1:])} |")
    print("|---|---|" + "---|" * (len(args.settings) - 1))
    for name in args.jobs:
        cells = []
        for setting in args.settings[1:]:
            bad = [t for t in results[ref][name] if results[setting][name].get(t) != results[ref][name][t]]
            bad += [t for t in results[setting][name] if t not in results[ref][name]]
            differ += len(bad)
            cells.append("identical" if not bad else "DIFFER: " + ", ".join(bad))
        print(f"| {name} | {len(results[ref][name])} | {' | '.join(cells)} |")
    print(f"\noutputs in {base}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
