"""A job script's whole life (`jobs/*.py`): take the signals first, run the job (or the tour), exit."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType


def run_job(name: str) -> None:
    """Run job `name` and exit; a failed run exits at once, after its one line."""
    _take_signals(f"{name}: error: stopped by {{how}} before the run started; nothing was written")
    from scribe_spark.cli.job import main
    _exit(main(name))


def run_tour(out: str, title: str) -> None:
    """Run the quick tour into `out` in this one driver and exit as `run_job` does."""
    _take_signals("tour: error: stopped by {how} between jobs; the jobs before are complete")
    from scribe_spark.cli import tour
    _exit(tour.run(out, title))


def _take_signals(said: str) -> None:
    """Outside a job (which takes them itself), SIGINT and SIGTERM end the process with the line `said`.

    Taken before the library's imports, which take a few seconds; run.sh learns the driver's pid.
    """
    def early(signum: int, frame: FrameType | None) -> None:
        line = said.format(how="Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name)
        if not tell_run_sh("status", f"{128 + signum}\n{line}"):
            print(line, file=sys.stderr, flush=True)
        os._exit(128 + signum)
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, early)
    tell_run_sh("driver.pid", os.getpid())


def _exit(code: int) -> None:
    """Exit with `code`; after a failure at once: the run may have stopped inside a Spark call, and
    the interpreter's exit would then wait on, or print about, a JVM that is itself shutting down."""
    sys.stdout.flush()
    sys.stderr.flush()
    if code not in (0, 2):   # 2: bad input, refused before anything ran
        for s in (signal.SIGINT, signal.SIGTERM):   # a late second signal must not speak after the line
            signal.signal(s, signal.SIG_IGN)
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
