"""`python -m scribe_spark.cli check EXPERIMENT [ARGS...]`: run.sh's pre-start check (and `env cluster`)."""
import os
import signal
import sys


def _stopped(signum, frame) -> None:
    """Ctrl-C during the check (its imports included): one line, and nothing was written."""
    print("run.sh: stopped by Ctrl-C before the run started; nothing was written", file=sys.stderr,
          flush=True)
    os._exit(128 + signum)


signal.signal(signal.SIGINT, _stopped)

from scribe_spark.cli.endings import EXIT_BAD_INPUT  # noqa: E402  (after the handler: imports take a while)
from scribe_spark.cli.job import check, check_cluster_environment  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1:] == ["env", "cluster"]:
        sys.exit(check_cluster_environment())
    if len(sys.argv) < 3 or sys.argv[1] != "check":
        print("usage: python -m scribe_spark.cli check EXPERIMENT [ARGS...]", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    sys.exit(check(sys.argv[2], sys.argv[3:]))
