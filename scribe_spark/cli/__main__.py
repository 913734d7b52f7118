"""run.sh's pre-start checks: `python -m scribe_spark.cli check EXPERIMENT [ARGS...]`, `check-tour OUT`
(every job of the quick tour) and `env cluster` (the local cluster's knobs)."""
import os
import signal
import sys


def _stopped(signum, frame) -> None:
    """Ctrl-C or SIGTERM during the check (its imports included): one line, and nothing was written."""
    how = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    print(f"run.sh: stopped by {how} before the run started; nothing was written", file=sys.stderr,
          flush=True)
    os._exit(128 + signum)


for _s in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_s, _stopped)

from scribe_spark.cli.endings import EXIT_BAD_INPUT  # noqa: E402  (after the handler: imports take a while)
from scribe_spark.cli.job import check, check_cluster_environment  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1:] == ["env", "cluster"]:
        sys.exit(check_cluster_environment())
    if len(sys.argv) == 3 and sys.argv[1] == "check-tour":
        from scribe_spark.cli.tour import check as check_tour
        sys.exit(check_tour(sys.argv[2]))
    if len(sys.argv) < 3 or sys.argv[1] != "check":
        print("usage: python -m scribe_spark.cli check EXPERIMENT [ARGS...]", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    sys.exit(check(sys.argv[2], sys.argv[3:]))
