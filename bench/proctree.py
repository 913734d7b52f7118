"""Peak memory of a process tree, sampled from /proc (Linux), for the benchmarks."""
from __future__ import annotations

import os
import threading
import time


def snapshot() -> tuple[dict, dict, dict]:
    """Return (children by parent pid, RSS in KiB by pid, command line by pid) of every process."""
    children, rss, cmd = {}, {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = open(f"/proc/{d}/status").read()
            cmd[int(d)] = open(f"/proc/{d}/cmdline", "rb").read()
        except OSError:
            continue
        children.setdefault(int(st.split("PPid:")[1].split()[0]), []).append(int(d))
        rss[int(d)] = int(st.split("VmRSS:")[1].split()[0]) if "VmRSS:" in st else 0
    return children, rss, cmd


def tree_pids(roots, children) -> list[int]:
    """Return the pids of the processes under `roots`, roots included."""
    out, stack = [], list(roots)
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(children.get(p, []))
    return out


def tree_kb(roots, children, rss) -> int:
    """Return the summed RSS (KiB) of the processes under `roots`, roots included."""
    return sum(rss.get(p, 0) for p in tree_pids(roots, children))


class PeakSampler:
    """Sample the summed RSS of a process tree every `every` seconds in a thread; `peak_kb` is the maximum."""

    def __init__(self, pid: int, every: float = 0.5) -> None:
        self.pid, self.every, self.peak_kb = pid, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            children, rss, _ = snapshot()
            self.peak_kb = max(self.peak_kb, tree_kb([self.pid], children, rss))
            time.sleep(self.every)

    def stop(self) -> int:
        """Stop sampling; return the peak in KiB."""
        self._stop.set()
        self._thread.join()
        return self.peak_kb
