"""Spark's reused Python workers: leave quietly when the JVM closes an idle worker's socket.

A reused worker waits for its next task in `pyspark.worker.main`. When the JVM closes an idle
worker (after a minute without a task, and for every idle worker when the session stops), that
wait ends at end of file; PySpark 4.1 then writes the EOFError back to the closed socket, the
daemon's flush fails and prints a `BrokenPipeError` traceback (SPARK-54344 made it a raise). Over
Unix domain sockets (`session.SESSION_CONF`) the write fails at once, so long runs and the end
of most jobs printed such tracebacks. Here a worker whose socket is at end of file before a task
starts raises SystemExit(1) and writes nothing: the daemon takes a non-zero code from the worker's
main as "do not reuse" and ends the process, as it ends any worker it will not reuse. A task that
has started is untouched.

This reaches only the workers that imported the library, that is, those that ran a library task.
PySpark computes a frame made from a Python list, or from an empty pandas frame, in plain Python
tasks. These run in a second pool of workers that never import the library; one of them printed a
traceback at the end of a scribe_repair run. The library therefore makes every frame of driver
data with `arrow.local_frame`, which the JVM reads from Arrow (tests/test_worker_exit.py checks
that no `createDataFrame` call is made outside `arrow.py`).
"""
from __future__ import annotations

import sys
from typing import BinaryIO, Callable

_DAEMON = "pyspark.daemon"


def _quiet_at_eof(main: Callable[[BinaryIO, BinaryIO], None]) -> Callable[[BinaryIO, BinaryIO], None]:
    """Wrap a worker's main: at end of file before a task, raise SystemExit(1) and write nothing."""
    def worker_main(infile: BinaryIO, outfile: BinaryIO) -> None:
        if infile.peek(1) == b"":   # the JVM closed this idle worker: there is no one to answer
            sys.exit(1)
        main(infile, outfile)
    worker_main.scribe_spark = True
    return worker_main


def install() -> bool:
    """In a forked PySpark daemon worker, make its later tasks' main quiet at EOF; return whether it did."""
    daemon = sys.modules.get("__main__")
    spec = getattr(daemon, "__spec__", None)
    if spec is None or spec.name != _DAEMON or not callable(getattr(daemon, "worker_main", None)):
        return False
    if getattr(daemon.worker_main, "scribe_spark", False):
        return False
    daemon.worker_main = _quiet_at_eof(daemon.worker_main)
    return True
