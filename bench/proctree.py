"""Peak memory of a process tree, sampled from /proc (Linux), for the benchmarks."""
from __future__ import annotations

import os
import threading
import time
from typing import Callable


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


def rollup(pid: int) -> dict[str, int] | None:
    """Return a process's /proc/PID/smaps_rollup sizes in KiB by field (Rss, Pss, Anonymous, ...), or
    None if it cannot be read (the process is gone)."""
    try:
        lines = open(f"/proc/{pid}/smaps_rollup").read().splitlines()[1:]   # the first is the range
    except OSError:
        return None
    return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in lines if ":" in line)}


def pss(pids, rss: dict) -> dict:
    """Return the proportional set size (KiB) of each of `pids`: shared pages (a file mapped by every
    worker) divided among the processes that map them, where RSS counts them in each. A process that
    is gone keeps its RSS."""
    out = dict(rss)
    for p in pids:
        sizes = rollup(p)
        if sizes and "Pss" in sizes:
            out[p] = sizes["Pss"]
    return out


def tree_pids(roots, children) -> list[int]:
    """Return the pids of the processes under `roots`, roots included."""
    out, stack = [], list(roots)
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(children.get(p, []))
    return out


def role(cmdline: bytes) -> str:
    """What a process of a Spark run is: a JVM, a Python worker (pyspark's daemon and the workers
    it forks), or the Python driver (with the shells that start it)."""
    if b"java" in cmdline.split(b"\0", 1)[0]:
        return "jvm"
    worker = b"pyspark.daemon" in cmdline or b"pyspark.worker" in cmdline
    return "python_workers" if worker else "python_driver"


def by_role(pids, rss, cmd) -> dict[str, tuple[int, int]]:
    """Return the summed RSS (KiB) and the number of processes of each `role` among `pids`."""
    out: dict[str, tuple[int, int]] = {}
    for p in pids:
        k = role(cmd.get(p, b""))
        kb, n = out.get(k, (0, 0))
        out[k] = (kb + rss.get(p, 0), n + 1)
    return out


class PeakSampler:
    """Sample the summed RSS (with `proportional`, PSS) of a process tree every `every` seconds in a
    thread; `peak_kb` is the
    maximum, `at_peak` its split by `role` (KiB, and the number of processes of each role) and
    `role_peak_kb` each role's own maximum. With `also`, the tree also takes every process whose
    command line it accepts (a standalone cluster's executors, which are not the pid's children)."""

    def __init__(self, pid: int, every: float = 0.5, also: Callable[[bytes], bool] | None = None,
                 proportional: bool = False) -> None:
        self.pid, self.every, self.also, self.proportional = pid, every, also, proportional
        self.peak_kb, self.at_peak, self.role_peak_kb = 0, {}, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            children, rss, cmd = snapshot()
            roots = [self.pid] + ([p for p, c in cmd.items() if self.also(c)] if self.also else [])
            pids = tree_pids(roots, children)
            split = by_role(pids, pss(pids, rss) if self.proportional else rss, cmd)
            total = sum(kb for kb, _ in split.values())
            if total > self.peak_kb:
                self.peak_kb, self.at_peak = total, split
            for r, (kb, _) in split.items():
                self.role_peak_kb[r] = max(self.role_peak_kb.get(r, 0), kb)
            time.sleep(self.every)

    def stop(self) -> int:
        """Stop sampling; return the peak in KiB."""
        self._stop.set()
        self._thread.join()
        return self.peak_kb
