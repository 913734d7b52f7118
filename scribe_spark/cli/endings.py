"""How a run ends: one line naming the cause and what to do, and an exit code for each kind of ending.

A run that fails never shows a stack trace unless `--debug` asks for it: the cause is read from
the exception (Python's own, or the Java exception Py4J carries from Spark) and said in one line.
SIGINT (Ctrl-C) and SIGTERM end a run the same way, through `Stopped`, so the folder is left
resumable and the line says how to continue.
"""
from __future__ import annotations

import errno
import signal
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Iterator

EXIT_OK = 0
EXIT_INTERNAL = 1        # a fault of the simulator itself: please report it, with --debug's output
EXIT_BAD_INPUT = 2       # refused before Spark started
EXIT_OUT_OF_MEMORY = 3   # the Python driver or Spark's JVM ran out of memory (or was killed for it)
EXIT_DISK_FULL = 4       # the output folder's or Spark's local folder's disk is full
EXIT_MASTER = 5          # the Spark master cannot be reached
EXIT_CLUSTER_CONFIG = 6  # the cluster manager (YARN, Kubernetes) lacks its configuration
EXIT_DONE_ALREADY = 10   # `check` found nothing to run (a complete run to --resume, or --help)
EXIT_SIGNAL = 128        # + the signal's number: 130 for Ctrl-C, 143 for SIGTERM

CODES = {
    EXIT_OK: "the run completed; its folder is in place",
    EXIT_INTERNAL: "the simulator failed: an error of ours (rerun with --debug for the stack trace, and "
                   "report it)",
    EXIT_BAD_INPUT: "bad input, refused before Spark started; nothing was written",
    EXIT_OUT_OF_MEMORY: "out of memory",
    EXIT_DISK_FULL: "a disk is full (the output folder's, or Spark's local folder's)",
    EXIT_MASTER: "the Spark master did not answer",
    EXIT_CLUSTER_CONFIG: "the cluster manager lacks its configuration",
    EXIT_SIGNAL + signal.SIGINT: "stopped by Ctrl-C (SIGINT)",
    EXIT_SIGNAL + signal.SIGTERM: "stopped by SIGTERM",
}


class Stopped(BaseException):
    """The run was asked to stop by a signal (SIGINT or SIGTERM)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Inside the block, SIGINT and SIGTERM raise `Stopped` once; a second one is ignored while the run
    cleans up. The handlers before are back after the block."""
    def stop(signum: int, frame: FrameType | None) -> None:
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
        raise Stopped(signum)
    before = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def ignore_signals() -> None:
    """From now on this process ignores SIGINT and SIGTERM (it is already stopping)."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)


@contextmanager
def signals_held() -> Iterator[None]:
    """Inside the block SIGINT and SIGTERM are ignored: what it does must finish once begun."""
    before = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


@dataclass(frozen=True)
class Ending:
    """How a run ended: its exit code and the line that says why and what to do."""

    code: int
    cause: str


def ending(e: BaseException, out: object = "the output folder") -> Ending:
    """Read the cause of a failure from its exception (and the Java exception beneath, if any).

    `out` names the output folder, for a full disk whose exception names no file.
    """
    # a signal first: an error raised while the run unwound from it (a clean-up's Spark call on the
    # connection the signal cut, say) is its consequence, not the cause
    stop = next((x for x in _chain(e) if isinstance(x, (Stopped, KeyboardInterrupt))), None)
    if isinstance(stop, Stopped):
        how = "Ctrl-C" if stop.signum == signal.SIGINT else stop.args[0]
        return Ending(EXIT_SIGNAL + stop.signum, f"stopped by {how}")
    if isinstance(stop, KeyboardInterrupt):
        return Ending(EXIT_SIGNAL + signal.SIGINT, "stopped by Ctrl-C")
    if isinstance(e, MemoryError):
        return Ending(EXIT_OUT_OF_MEMORY, "the Python driver ran out of memory; lower the run's size or give "
                                          "the machine more memory")
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:
        where = e.filename or out
        return Ending(EXIT_DISK_FULL, f"no space left on the disk of {where}; free some and resume")
    text = _java_text(e)
    if "No space left on device" in text:
        return Ending(EXIT_DISK_FULL, "no space left in Spark's local folder (spark.local.dir, /tmp by "
                                      "default); "
                                      "free some, or point SPARK_LOCAL_DIRS at a larger disk, and resume")
    if "OutOfMemoryError" in text:
        return Ending(EXIT_OUT_OF_MEMORY, "Spark's JVM ran out of memory; raise SCRIBE_DRIVER_MEMORY (or "
                                          "SCRIBE_EXECUTOR_MEMORY on a cluster) or lower the run's size")
    if "All masters are unresponsive" in text or "Failed to connect to master" in text:
        return Ending(EXIT_MASTER, "the Spark master stopped answering; check it (./run.sh cluster status) "
                                   "and resume")
    if _jvm_gone(e):
        return Ending(EXIT_OUT_OF_MEMORY, "Spark's JVM stopped under the run, most often killed for lack of "
                                          "memory; raise SCRIBE_DRIVER_MEMORY or lower the run's size")
    first = (str(e).strip().splitlines() or [""])[0][:300]
    return Ending(EXIT_INTERNAL, f"the simulator failed: {type(e).__name__}: {first} (rerun with --debug for "
                                 "the stack trace)")


def _java_text(e: BaseException) -> str:
    """The text of the Java exception a Py4J error carries (empty for a Python exception)."""
    text = []
    for x in _chain(e):
        if type(x).__module__.startswith(("py4j", "pyspark")):
            text.append(str(x))
    return "\n".join(text)


def _jvm_gone(e: BaseException) -> bool:
    """Whether the exception says Py4J lost the JVM (it exited or was killed)."""
    for x in _chain(e):
        if type(x).__name__ == "Py4JNetworkError":
            return True
        if type(x).__module__.startswith("py4j") and "Answer from Java side is empty" in str(x):
            return True
    return False


def _chain(e: BaseException) -> list[BaseException]:
    out, seen = [], set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        out.append(e)
        e = e.__cause__ or e.__context__
    return out
