"""Each process's own memory at its peak, by kind, while a command runs (Linux).

    .venv/bin/python bench/process_memory.py -- ./run.sh scribe_multicast --set nodes=4000000

Every second it reads /proc/PID/smaps_rollup of every process under the command and keeps, per
process, the sample where its anonymous memory (its own: heap, arrays; not the files it maps) peaked,
with its resident and proportional set sizes then. At the end one JSON line gives, for each kind of
process (`proctree.role`: the JVM, the Python driver, the Python workers), the process with the
largest own peak: own, resident and PSS in MiB. Files mapped by several workers (the ring) count in
each one's resident size, once in all their PSS; a worker's own memory is what it holds alone.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import proctree  # noqa: E402  (bench/ is the script's folder)

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    command = sys.argv[1:]
    if command[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return
    command = command[1:] if command[:1] == ["--"] else command
    if not command:
        sys.exit("give the command to measure after --")
    proc = subprocess.Popen(command, cwd=ROOT)
    peaks: dict[int, tuple[str, dict[str, int]]] = {}
    while proc.poll() is None:
        children, _rss, cmd = proctree.snapshot()
        for pid in proctree.tree_pids([proc.pid], children):
            now = proctree.rollup(pid)
            if now and now["Anonymous"] > peaks.get(pid, ("", {"Anonymous": -1}))[1]["Anonymous"]:
                peaks[pid] = (proctree.role(cmd.get(pid, b"")), now)
        time.sleep(1.0)
    out: dict[str, dict] = {}
    for kind, now in peaks.values():
        if now["Anonymous"] > out.get(kind, {}).get("own_mib", -1) * 1024:
            out[kind] = {"own_mib": round(now["Anonymous"] / 1024), "resident_mib": round(now["Rss"] / 1024),
                         "pss_mib": round(now["Pss"] / 1024)}
    print(json.dumps({"command": " ".join(command), "exit": proc.returncode, "largest_own_peak": out}))
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
