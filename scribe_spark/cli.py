"""The shared entry point of every job: parse arguments, validate, run, publish outputs.

Parameters are validated before Spark starts; outputs go to a temporary folder that is
renamed to `<out>/<experiment>` only when the run completed.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from scribe_spark import config


class Run:
    """What an experiment gets: its parameters, an output folder and a progress logger."""

    def __init__(self, name: str, params: Any, folder: Path):
        self.name = name
        self.params = params
        self.folder = folder
        self.t0 = time.time()
        self.timings: dict[str, float] = {}

    def log(self, msg: str) -> None:
        print(f"[{self.name} {time.time() - self.t0:7.1f}s] {msg}", flush=True)

    def path(self, name: str) -> Path:
        return self.folder / name


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def parse_args(name: str, argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=name, description=f"Run the {name} experiment.")
    ap.add_argument("--conf", help=f"TOML parameter file (default conf/{name}.toml)")
    ap.add_argument("--out", help="output root; results go to OUT/%s (default data/out/<timestamp>)" % name)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a parameter with a TOML value, e.g. --set nodes=[1000,10000]")
    return ap.parse_args(argv)


def main(name: str, params_cls: type, experiment: Callable[[Any, Run], None], argv: list[str] | None = None) -> int:
    """Run one experiment job; return the process exit code."""
    args = parse_args(name, sys.argv[1:] if argv is None else argv)
    conf = Path(args.conf) if args.conf else repo_root() / "conf" / f"{name}.toml"
    try:
        params = config.load(params_cls, conf, args.set)
    except config.ConfigError as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return 2
    out_root = Path(args.out).resolve() if args.out else repo_root() / "data" / "out" / datetime.now().strftime("%Y%m%d-%H%M%S")
    final = out_root / name
    out_root.mkdir(parents=True, exist_ok=True)
    tmp = out_root / f".{name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    run = Run(name, params, tmp)
    try:
        (tmp / "params.toml").write_text(f"# resolved parameters of {name} (conf: {conf})\n" + config.to_toml(params))
        experiment(params, run)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.exists():
        old = out_root / f".{name}.old-{os.getpid()}"
        final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(final)
    run.log(f"done: outputs in {final}")
    for p in sorted(final.iterdir()):
        print(f"  {p}")
    return 0
