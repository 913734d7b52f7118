"""The shared entry point of every job: check everything, run, publish the outputs, end in one line.

`plan` checks the command line, the parameters, the environment knobs, the output folder and the
machine size without starting Spark or writing anything; `run.sh` calls it through `python -m
scribe_spark.cli check` before `spark-submit`, so bad input costs no JVM start-up. `main` runs
the job into a hidden folder (`folder`) and ends the process the way `endings` says.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import sys
import traceback
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from scribe_spark import capacity, loader
from scribe_spark.cli import endings, environment, folder, logs
from scribe_spark.cli.args import UsageError, parse_args, project_root
from scribe_spark.cli.endings import EXIT_BAD_INPUT, EXIT_DONE_ALREADY
from scribe_spark.cli.start import tell_run_sh
from scribe_spark.experiments import registry
from scribe_spark.experiments.run import Run
from scribe_spark.knobs import ConfigError


@dataclass(frozen=True)
class Plan:
    """A checked command line: what to run, with which parameters, into which folder."""

    job: registry.Job
    params: Any
    conf: Path
    out_root: Path
    resume: bool
    digest: str
    argv: tuple[str, ...]
    pdf: bool = False
    debug: bool = False

    @property
    def final(self) -> Path:
        return self.out_root / self.job.name


def digest(name: str, params: Any) -> str:
    """Return the hash that identifies a run: the experiment and its resolved parameters."""
    return hashlib.sha256(f"{name}\n{loader.to_toml(params)}".encode()).hexdigest()[:16]


def plan(name: str, argv: list[str]) -> Plan:
    """Check a job's command line, parameters, output folder and size; start nothing, write nothing."""
    if name not in registry.JOBS:
        raise UsageError(f"unknown experiment {name!r} (available: {', '.join(registry.JOBS)})")
    job = registry.JOBS[name]
    args = parse_args(name, argv)
    conf = Path(args.conf) if args.conf else project_root() / "conf" / f"{name}.toml"
    params = loader.load(job.params, conf, args.set)
    capacity.check(params, environment.value("SCRIBE_DRIVER_MEMORY"), _master())
    if args.out:
        try:
            out_root = Path(args.out).resolve()
        except OSError as e:   # a name too long for the file system, say
            raise UsageError(f"--out {args.out}: cannot use it ({e.strerror})") from None
        folder.probe_out(out_root, name)
    elif args.resume:
        raise UsageError("--resume needs --out DIR, the output root of the run to continue")
    else:
        out_root = project_root() / "data" / "out" / datetime.now().strftime("%Y%m%d-%H%M%S")
    p = Plan(job, params, conf.resolve(), out_root, args.resume, digest(name, params), tuple(argv), args.pdf,
             args.debug)
    if p.resume:   # refuses an unfinished run with other parameters or one still running
        folder.resumable(p.out_root, name, p.digest, p.params)
    return p


def _master() -> str:
    """The Spark master run.sh hands the job (local[*] when run otherwise)."""
    return os.environ.get("SCRIBE_MASTER", "local[*]")


def _complete(p: Plan) -> bool:
    return p.final.is_dir() and folder.digest_of(p.final) == p.digest


def _nothing_to_do(name: str, p: Plan) -> str:
    """What --resume says of a complete run, and how to get PDFs that --pdf asks for and it lacks."""
    text = f"{name}: {p.final} already holds a complete run with these parameters; nothing to do"
    if p.pdf and not any(p.final.glob("*.pdf")):
        text += "; its plots were saved without --pdf: run it again without --resume to get PDFs"
    return text


def hint(p: Plan) -> str:
    """The command that continues this run after a stop (reproduce passes its own)."""
    given = os.environ.get("SCRIBE_RESUME_WITH")
    if given:
        return given
    rest, skip = [], False
    for a in p.argv:
        if skip:
            skip = False
        elif a == "--out":
            skip = True
        elif a != "--resume" and not a.startswith("--out="):
            rest.append(a)
    master = _master()   # run.sh's own default needs no flag; any other master must be given again
    on = [] if master == "local[*]" else ["--master", master]
    return shlex.join(["./run.sh", p.job.name, *rest, *on, "--out", str(p.out_root), "--resume"])


def check(name: str, argv: list[str]) -> int:
    """run.sh's pre-start check: one line and a non-zero exit on bad input, 10 if there is nothing to run.

    Nothing to run: --resume finds the run complete, or --help printed the job's options.
    """
    try:
        master = _master()
        environment.check_master(master)
        warnings = environment.check_environment("job", master)
        p = plan(name, argv)
        environment.reach_master(master)
    except (ConfigError, UsageError) as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except environment.MasterError as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return endings.EXIT_CLUSTER_CONFIG if e.unconfigured else endings.EXIT_MASTER
    except SystemExit as e:   # argparse's --help: printed, and nothing to submit
        return EXIT_DONE_ALREADY if e.code in (0, None) else EXIT_BAD_INPUT
    if p.resume and folder.resumable(p.out_root, name, p.digest, p.params) is None and _complete(p):
        print(_nothing_to_do(name, p))
        return EXIT_DONE_ALREADY
    for w in warnings + [capacity.peak_warning(p.params, environment.value("SCRIBE_DRIVER_MEMORY"), master)]:
        if w:
            print(f"{name}: warning: {w}", file=sys.stderr)
    return 0


def check_cluster_environment() -> int:
    """`./run.sh cluster start`'s check of the knobs it reads: one line and exit 2 on a bad one."""
    try:
        environment.check_environment("cluster")
    except ConfigError as e:
        print(f"run.sh: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def main(name: str, argv: list[str] | None = None) -> int:
    """Run one experiment job; return the process exit code."""
    argv = sys.argv[1:] if argv is None else argv
    logs.setup("--debug" in argv)
    try:
        p = plan(name, argv)
    except (ConfigError, UsageError) as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    continued = folder.resumable(p.out_root, name, p.digest, p.params) if p.resume else None
    if p.resume and continued is None and _complete(p):
        print(_nothing_to_do(name, p))
        return 0
    tmp = None
    with endings.stop_on_signals():
        try:
            tmp = folder.claim(p.out_root, name, continued)
            _run(p, tmp, continued)
        except SystemExit:   # asked for by the caller's own code (a benchmark's capture, say)
            raise
        except BaseException as e:
            return _end(name, p, tmp, e)
    return 0


def _run(p: Plan, tmp: Path, continued: Path | None) -> None:
    """Write params.toml, run the experiment into `tmp`, publish the folder."""
    name = p.job.name
    kept = folder.points_in(tmp) if continued is not None else 0   # from the earlier code
    rerun = shlex.join(["./run.sh", name, "--conf", str(p.final / "params.toml")])
    folder.write_params(tmp, name, p.conf, p.digest, p.params, rerun, kept)
    run = Run(name, p.params, tmp)
    logs.for_job(name, run.t0)
    if p.resume and continued is None:
        run.log(f"--resume: no unfinished run of {name} in {p.out_root}; starting afresh")
    if continued is not None:
        run.log(f"continuing the unfinished run from {continued.name} ({kept} points done)")
    run.log(f"writing to {tmp}; if this run stops, continue it with: {hint(p)}")
    from scribe_spark import report  # matplotlib: not for the pre-start check
    experiment = p.job.load()
    from scribe_spark.spark import shared
    made = shared.mark()
    outcome = experiment.simulate(p.params, run)
    report.write_tables(outcome, p.job.outputs, tmp)
    with report.vector_copies(p.pdf):
        experiment.report(outcome, p.params, run)
    try:   # the job's rings, masks and tables: nothing reads them again
        shared.free_since(made)
    except Exception as e:   # housekeeping: the run is complete whether or not its shares are freed
        run.log(f"could not free what the run shared ({e}); its files go when the process ends")
    with endings.signals_held():   # the run is complete: a stop now must not undo its publishing
        removed = folder.finish(tmp, p.final, name)
    for stale in removed:
        run.log(f"removed the unfinished folder {stale} of an earlier run that stopped")
    run.log(f"done: outputs in {p.final}")
    for f in sorted(p.final.iterdir()):
        print(f"  {f}")


def _end(name: str, p: Plan, tmp: Path | None, e: BaseException) -> int:
    """Leave the folder resumable (or remove it), write the one line, return the exit code."""
    endings.ignore_signals()   # the stop is under way: a second signal must not interrupt the cleanup
    end = endings.ending(e, p.out_root)
    if p.debug:
        traceback.print_exception(e)
    points = folder.abandon(tmp) if tmp is not None and tmp.exists() else 0
    if points:
        after = f"; {points} points kept in {tmp}; continue with: {hint(p)}"
    elif os.environ.get("SCRIBE_RESUME_WITH"):   # reproduce: the jobs before this one are kept
        after = f"; continue with: {hint(p)}"
    else:
        after = "; no sweep point had finished, so nothing was kept"
    line = f"{name}: error: {end.cause}{after}"
    if not tell_run_sh("status", f"{end.code}\n{line}"):
        print(line, file=sys.stderr, flush=True)
    return end.code
