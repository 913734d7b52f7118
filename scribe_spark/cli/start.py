"""A job script's whole life (`jobs/*.py`): take the signals first, then run `job.main` and exit."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType


def run_job(name: str) -> None:
    """Run job `name` and exit; a failed run exits at once, after its one line.

    The signals are taken before the library's imports, which take a few seconds: a signal then
    ends the process with one line, as nothing is written yet. Exiting at once after a failure:
    the run may have stopped inside a Spark call, and the interpreter's exit would then wait on,
    or print about, a JVM that is itself shutting down.
    """
    def early(signum: int, frame: FrameType | None) -> None:
        how = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        line = f"{name}: error: stopped by {how} before the run started; nothing was written"
        if not tell_run_sh("status", f"{128 + signum}\n{line}"):
            print(line, file=sys.stderr, flush=True)
        os._exit(128 + signum)
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, early)
    tell_run_sh("driver.pid", os.getpid())
    from scribe_spark.cli.job import EXIT_BAD_INPUT, main
    code = main(name)
    sys.stdout.flush()
    sys.stderr.flush()
    if code > EXIT_BAD_INPUT:
        os._exit(code)
    sys.exit(code)


def tell_run_sh(what: str, value: object) -> bool:
    """Leave a note for run.sh in its folder for this run (the driver's pid, or how the run ended).

    Spark hands the Python driver's stderr to its own stdout, so the line a run ends in is given to
    run.sh, which writes it on its stderr; without run.sh (spark-submit by hand) nothing is noted.
    """
    folder_of_run_sh = os.environ.get("SCRIBE_RUN_DIR")
    if not folder_of_run_sh:
        return False
    try:
        (Path(folder_of_run_sh) / what).write_text(f"{value}\n")
    except OSError:
        return False
    return True
