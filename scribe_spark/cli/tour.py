"""The quick tour: every experiment at its `conf/quick/` size, one after another in one Spark session.

One driver for all: a JVM starts once and its compiled code serves every job, which takes about a
third off the tour's time (the performance page has the figures); each job still runs as it
would alone (its own folder, params.toml, progress lines and ending) and gives the same tables.
The fastest experiments come first, so the first results are on disk within a minute, and the
index page is rewritten after each job.
"""
from __future__ import annotations

from pathlib import Path

from scribe_spark.cli.args import project_root

ORDER = ("tno_timestamp_size", "pastry_hops", "scribe_multicast", "scribe_small_groups", "scribe_repair",
         "tno_sequencer", "tno_ordering", "pastry_failures", "pastry_joins", "churn")


def jobs() -> list[tuple[str, list[str]]]:
    """Each tour job and its arguments (without --out)."""
    root = project_root() / "conf" / "quick"
    return [(name, ["--conf", str(root / f"{name}.toml")]) for name in ORDER]


def check(out: str) -> int:
    """Check every job of the tour before Spark starts; the first refusal's code, else 0."""
    from scribe_spark.cli.job import check as check_job
    for name, args in jobs():
        code = check_job(name, [*args, "--out", out])
        if code:
            return code
    return 0


def run(out: str, title: str) -> int:
    """Run the tour's jobs in this driver; stop at the first that fails and return its code."""
    from scribe_spark import report
    from scribe_spark.cli.job import main
    for name, args in jobs():
        print(f"== {name} ({Path(args[1]).relative_to(project_root())})", flush=True)
        code = main(name, [*args, "--out", out])
        if code:
            return code
        report.write_index(Path(out), title)
    return 0
