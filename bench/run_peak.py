"""Wall time and peak RSS of a whole command's process tree (driver JVM, Python driver and workers).

    .venv/bin/python bench/run_peak.py [--label TEXT] -- ./run.sh scribe_multicast --set nodes=2000000

The command's output passes through; at the end one JSON line with the command, exit code,
wall seconds and peak summed RSS (with --pss, proportional set size; GiB, sampled every 0.5 s),
with its split at the peak (the JVM, the Python workers, the Python driver), is printed and
appended to data/bench/run_peak.jsonl.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import proctree  # noqa: E402  (bench/ is the script's folder)

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", default="")
    ap.add_argument("--pss", action="store_true", help="sum proportional set sizes, not RSS: pages that "
                    "processes share (a memory-mapped file) are divided among them, not counted in each")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("give the command to measure after --")
    t0 = time.time()
    proc = subprocess.Popen(command, cwd=ROOT)
    sampler = proctree.PeakSampler(proc.pid, proportional=a.pss)
    rc = proc.wait()
    peak_kb = sampler.stop()
    out = {"label": a.label, "command": " ".join(command), "exit": rc, "wall_s": round(time.time() - t0, 1),
           "peak_gib": round(peak_kb / 2**20, 2), "measure": "pss" if a.pss else "rss",
           "date": time.strftime("%Y-%m-%d %H:%M"),
           "at_peak": {k: {"gib": round(kb / 2**20, 2), "processes": n}
                       for k, (kb, n) in sampler.at_peak.items()},
           "each_kind_peak_gib": {k: round(kb / 2**20, 2) for k, kb in sampler.role_peak_kb.items()}}
    print(json.dumps(out), flush=True)
    log = ROOT / "data/bench/run_peak.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f:
        f.write(json.dumps(out) + "\n")
    sys.exit(rc)


if __name__ == "__main__":
    main()
