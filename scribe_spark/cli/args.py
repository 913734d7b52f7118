"""A job's command line: its options, parsed without exiting, and where the project's files are."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


class UsageError(ValueError):
    """The command line or the output folder cannot be used."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors raise UsageError instead of exiting."""

    def error(self, message: str):
        raise UsageError(message)


def parse_args(name: str, argv: list[str]) -> argparse.Namespace:
    """Parse a job's command line; errors raise UsageError instead of exiting."""
    ap = Parser(prog=name, description=f"Run the {name} experiment.")
    ap.add_argument("--conf", help=f"TOML parameter file (default conf/{name}.toml)")
    ap.add_argument("--out", help="output root; results go to OUT/%s (default data/out/<timestamp>)" % name)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a parameter with a TOML value, e.g. --set nodes=[1000,10000]")
    ap.add_argument("--resume", action="store_true",
                    help="continue the unfinished run in OUT with the same parameters (needs --out)")
    ap.add_argument("--pdf", action="store_true",
                    help="also write each plot as a vector PDF beside its PNG")
    ap.add_argument("--debug", action="store_true",
                    help="on failure, show the stack trace and everything Spark printed")
    return ap.parse_args(argv)


def project_root() -> Path:
    """Return the checkout holding conf/ and jobs/, found from the job script or from the package."""
    starts = [Path(sys.argv[0]).resolve().parent] if sys.argv and sys.argv[0] else []
    for start in starts + [Path(__file__).resolve().parent, Path.cwd()]:
        for d in (start, *start.parents):
            if (d / "conf").is_dir() and (d / "jobs").is_dir():
                return d
    return Path.cwd()
