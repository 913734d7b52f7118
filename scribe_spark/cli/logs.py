"""Progress lines: the library's INFO records on stdout, each prefixed with the job and its seconds."""
from __future__ import annotations

import logging
import sys
import time

log = logging.getLogger("scribe_spark")


class _Stdout(logging.Handler):
    """Write records to whatever sys.stdout is at the time (it may be replaced, as under pytest)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stdout.write(self.format(record) + "\n")
            sys.stdout.flush()
        except Exception:
            self.handleError(record)


class _JobFormatter(logging.Formatter):
    """Prefix each line of the library (experiments and protocols alike) with `[job  seconds]`."""

    def __init__(self) -> None:
        super().__init__()
        self.job: tuple[str, float] | None = None

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if self.job is None:
            return msg
        name, t0 = self.job
        return f"[{name} {time.time() - t0:7.1f}s] {msg}"


_FORMAT = _JobFormatter()


def setup(debug: bool = False) -> None:
    """Send the library's INFO lines (logger `scribe_spark` and its children) to stdout.

    Py4J logs what it sees of a failing JVM; that belongs to the one line a failure ends in,
    so its own records show only with --debug.
    """
    if not log.handlers:
        handler = _Stdout()
        handler.setFormatter(_FORMAT)
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    logging.getLogger("py4j").setLevel(logging.NOTSET if debug else logging.CRITICAL + 1)


def for_job(name: str, t0: float) -> None:
    """Prefix the lines from now on with the job's name and the seconds since `t0`."""
    _FORMAT.job = (name, t0)
