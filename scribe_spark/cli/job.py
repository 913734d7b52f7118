"""The shared entry point of every job: parse arguments, check everything, run, publish outputs.

`plan` checks the command line, the parameters, the output folder and the machine size
without starting Spark or writing anything; `run.sh` calls it through `python -m
scribe_spark.cli check` before `spark-submit`, so bad input costs no JVM start-up. A run
writes into a hidden folder `<out>/.<experiment>.tmp-<pid>`, keeps each finished sweep
point there, and renames the folder to `<out>/<experiment>` only when the run completed.
`--resume` continues the unfinished folder of a dead run with the same parameters.
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import pickle
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, TypeVar

from scribe_spark import capacity, config, loader, registry

log = logging.getLogger("scribe_spark")
T = TypeVar("T")
POINTS = ".points"       # finished sweep points inside the temporary folder
OWNER = ".owner"         # pid and start time of the process writing the temporary folder
EXIT_BAD_INPUT = 2
EXIT_DONE_ALREADY = 10   # `check` found nothing to run (a complete run to --resume, or --help)
# the masters spark-submit takes: local[N] (N or *, and retries), a local test cluster, standalone, YARN, k8s
MASTER = re.compile(r"local(\[(\*|0*[1-9]\d*)(\s*,\s*\d+)?\])?|local-cluster\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]"
                    r"|spark://\S+|yarn|k8s://\S+")


class UsageError(ValueError):
    """The command line or the output folder cannot be used."""


class Run:
    """What an experiment gets: its parameters, an output folder, progress lines and saved sweep points."""

    def __init__(self, name: str, params: Any, folder: Path):
        self.name = name
        self.params = params
        self.folder = folder
        self.t0 = time.time()
        self._points: dict[str, Any] = {}

    def log(self, msg: str) -> None:
        """Write one progress line (the handler prefixes the job name and the seconds since it started)."""
        log.info("%s", msg)

    def path(self, name: str) -> Path:
        """Return the path of an output file."""
        return self.folder / name

    def point(self, key: str, compute: Callable[[], T]) -> T:
        """One sweep point's result: saved by an interrupted run (--resume), else computed and saved."""
        if key in self._points:
            return self._points[key]
        folder = self.folder / POINTS
        f = folder / (re.sub(r"[^A-Za-z0-9_.=-]+", "_", key) + ".pkl")
        if f.exists():
            self.log(f"{key}: taken from the interrupted run")
            self._points[key] = pickle.loads(f.read_bytes())
            return self._points[key]
        value = self._points[key] = compute()
        folder.mkdir(exist_ok=True)
        part = f.with_suffix(".part")
        part.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(part, f)
        return value


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

    @property
    def final(self) -> Path:
        return self.out_root / self.job.name


def project_root() -> Path:
    """Return the checkout holding conf/ and jobs/, found from the job script or from the package."""
    starts = [Path(sys.argv[0]).resolve().parent] if sys.argv and sys.argv[0] else []
    for start in starts + [Path(__file__).resolve().parent, Path.cwd()]:
        for d in (start, *start.parents):
            if (d / "conf").is_dir() and (d / "jobs").is_dir():
                return d
    return Path.cwd()


def parse_args(name: str, argv: list[str]) -> argparse.Namespace:
    """Parse a job's command line; errors raise UsageError instead of exiting."""
    ap = _Parser(prog=name, description=f"Run the {name} experiment.")
    ap.add_argument("--conf", help=f"TOML parameter file (default conf/{name}.toml)")
    ap.add_argument("--out", help="output root; results go to OUT/%s (default data/out/<timestamp>)" % name)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a parameter with a TOML value, e.g. --set nodes=[1000,10000]")
    ap.add_argument("--resume", action="store_true",
                    help="continue the unfinished run in OUT with the same parameters (needs --out)")
    ap.add_argument("--pdf", action="store_true",
                    help="also write each plot as a vector PDF beside its PNG")
    return ap.parse_args(argv)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(message)


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
    capacity.check(params)
    if args.out:
        try:
            out_root = Path(args.out).resolve()
            _check_writable(out_root)
        except OSError as e:   # a name too long for the file system, say
            raise UsageError(f"--out {args.out}: cannot use it ({e.strerror})") from None
    elif args.resume:
        raise UsageError("--resume needs --out DIR, the output root of the run to continue")
    else:
        out_root = project_root() / "data" / "out" / datetime.now().strftime("%Y%m%d-%H%M%S")
    p = Plan(job, params, conf.resolve(), out_root, args.resume, digest(name, params), tuple(argv), args.pdf)
    if p.resume:
        _resumable(p)   # refuses an unfinished run with other parameters or one still running
    return p


def _check_writable(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a folder")
    existing = next(d for d in (out, *out.parents) if d.exists())
    if not existing.is_dir():
        raise UsageError(f"--out {out}: cannot create it, {existing} is not a folder")
    try:   # a real probe: permission bits do not tell root about read-only or virtual file systems
        os.rmdir(tempfile.mkdtemp(prefix=".scribe-probe-", dir=existing))
    except OSError as e:
        raise UsageError(f"--out {out}: cannot write in {existing} ({e.strerror})") from None


# ------------------------------------------------------------------ unfinished runs

def _process_start(pid: int) -> str | None:
    """Return the start time of process pid (clock ticks since boot), None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return "?"
        return "?"
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]   # a zombie is as good as gone


def _alive(tmp: Path) -> bool:
    """True if the process that owns an unfinished run folder is still running."""
    try:
        pid, start = (tmp / OWNER).read_text().split()
    except (OSError, ValueError):
        return False
    now = _process_start(int(pid))
    return now is not None and (now == start or "?" in (now, start))


def _unfinished(out_root: Path, name: str) -> list[Path]:
    """Return the temporary folders of runs of `name` in out_root whose process is gone, most points first."""
    found = [d for d in out_root.glob(f".{name}.tmp-*") if d.is_dir() and not _alive(d)]
    return sorted(found, key=lambda d: (-len(list((d / POINTS).glob("*.pkl"))), d.name))


def _digest_of(folder: Path) -> str | None:
    try:
        head = (folder / "params.toml").read_text().splitlines()[:3]
    except OSError:
        return None
    return next((line.split(":", 1)[1].strip() for line in head if line.startswith("# digest:")), None)


def _difference(p: Plan, folder: Path) -> str:
    """Name the first parameter whose value differs between this plan and a saved run."""
    try:
        text = (folder / "params.toml").read_text()
        theirs = tomllib.loads(text)
    except (OSError, tomllib.TOMLDecodeError):
        return "its params.toml is missing or unreadable"
    ours = tomllib.loads(loader.to_toml(p.params))

    def flat(d: dict, at: str = "") -> dict:
        out = {}
        for k, v in d.items():
            out.update(flat(v, f"{at}{k}.") if isinstance(v, dict) else {f"{at}{k}": v})
        return out
    a, b = flat(ours), flat(theirs)
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            return f"key '{k}' is {b.get(k)!r} there and {a.get(k)!r} here"
    return "its parameter hash differs"


def _resumable(p: Plan) -> Path | None:
    """Return the unfinished folder --resume continues (None: start afresh); refuse other parameters."""
    if not p.out_root.is_dir():
        return None
    stale = _unfinished(p.out_root, p.job.name)
    same = [d for d in stale if _digest_of(d) == p.digest]
    if same:
        return same[0]
    if stale:
        raise UsageError(f"--resume: the unfinished run {stale[0]} has other parameters "
                         f"({_difference(p, stale[0])}); run without --resume to start afresh")
    running = [d for d in p.out_root.glob(f".{p.job.name}.tmp-*") if d.is_dir() and _alive(d)]
    if running:
        raise UsageError(f"--resume: the run writing {running[0]} is still going")
    return None


def _complete(p: Plan) -> bool:
    return p.final.is_dir() and _digest_of(p.final) == p.digest


def _nothing_to_do(name: str, p: Plan) -> str:
    """What --resume says of a complete run, and how to get PDFs that --pdf asks for and it lacks."""
    text = f"{name}: {p.final} already holds a complete run with these parameters; nothing to do"
    if p.pdf and not any(p.final.glob("*.pdf")):
        text += "; its plots were saved without --pdf: run it again without --resume to get PDFs"
    return text


def _hint(p: Plan) -> str:
    rest, skip = [], False
    for a in p.argv:
        if skip:
            skip = False
        elif a == "--out":
            skip = True
        elif a != "--resume" and not a.startswith("--out="):
            rest.append(a)
    return shlex.join(["./run.sh", p.job.name, *rest, "--out", str(p.out_root), "--resume"])


# ------------------------------------------------------------------ entry points

def check_master(master: str) -> None:
    """Raise UsageError unless `master` is a Spark master URL that spark-submit takes."""
    if not MASTER.fullmatch(master):
        raise UsageError(f"--master {master!r}: not a Spark master URL "
                         "(local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL)")


def check(name: str, argv: list[str]) -> int:
    """run.sh's pre-start check: one line and exit 2 on bad input, 10 if there is nothing to run.

    Nothing to run: --resume finds the run complete, or --help printed the job's options.
    """
    try:
        check_master(os.environ.get("SCRIBE_MASTER", "local[*]"))
        p = plan(name, argv)
    except (config.ConfigError, UsageError) as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SystemExit as e:   # argparse's --help: printed, and nothing to submit
        return EXIT_DONE_ALREADY if e.code in (0, None) else EXIT_BAD_INPUT
    if p.resume and _resumable(p) is None and _complete(p):
        print(_nothing_to_do(name, p))
        return EXIT_DONE_ALREADY
    warning = capacity.peak_warning(p.params)
    if warning:
        print(f"{name}: warning: {warning}", file=sys.stderr)
    return 0


class _Stdout(logging.Handler):
    """Write records to whatever sys.stdout is at the time (it may be replaced, as under pytest)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stdout.write(self.format(record) + "\n")
            sys.stdout.flush()
        except Exception:
            self.handleError(record)


_JOB: dict[str, Any] = {}   # the running job's name and start time, for the line prefix


class _JobFormatter(logging.Formatter):
    """Prefix each line of the library (experiments and protocols alike) with `[job  seconds]`."""

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if not _JOB:
            return msg
        return f"[{_JOB['name']} {time.time() - _JOB['t0']:7.1f}s] {msg}"


def _setup_logging() -> None:
    """Send the library's INFO lines (logger `scribe_spark` and its children) to stdout."""
    if not log.handlers:
        handler = _Stdout()
        handler.setFormatter(_JobFormatter())
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def main(name: str, argv: list[str] | None = None) -> int:
    """Run one experiment job; return the process exit code."""
    _setup_logging()
    try:
        p = plan(name, sys.argv[1:] if argv is None else argv)
    except (config.ConfigError, UsageError) as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    continued = _resumable(p) if p.resume else None
    if p.resume and continued is None and _complete(p):
        print(_nothing_to_do(name, p))
        return 0
    p.out_root.mkdir(parents=True, exist_ok=True)
    tmp = p.out_root / f".{name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    if continued is not None:
        continued.rename(tmp)   # claim it: a second --resume cannot take the same folder
    else:
        tmp.mkdir()
    (tmp / OWNER).write_text(f"{os.getpid()} {_process_start(os.getpid()) or '?'}\n")
    rerun = shlex.join(["./run.sh", name, "--conf", str(p.final / "params.toml")])
    kept = len(list((tmp / POINTS).glob("*.pkl"))) if continued is not None else 0   # from the earlier code
    code = _code_lines(tmp / "params.toml" if kept else None, code_version())
    (tmp / "params.toml").write_text(f"# resolved parameters of {name} (conf: {p.conf})\n"
                                     f"# digest: {p.digest}\n" + code +
                                     f"# rerun: {rerun}\n" + loader.to_toml(p.params))
    run = Run(name, p.params, tmp)
    _JOB.update(name=name, t0=run.t0)
    if p.resume and continued is None:
        run.log(f"--resume: no unfinished run of {name} in {p.out_root}; starting afresh")
    if continued is not None:
        run.log(f"continuing the unfinished run from {continued.name} ({kept} points done)")
    run.log(f"writing to {tmp}; if this run stops, continue it with: {_hint(p)}")
    from scribe_spark import report  # matplotlib: not for the pre-start check
    try:
        with report.vector_copies(p.pdf):
            p.job.load_runner()(p.params, run)
    except BaseException as e:
        points = len(list((tmp / POINTS).glob("*.pkl")))
        if points:
            (tmp / OWNER).unlink(missing_ok=True)
            run.log(f"stopped with {points} points kept in {tmp}; continue with: {_hint(p)}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, MemoryError):
            print(f"{name}: error: out of memory ({e or 'MemoryError'}); give the run more memory "
                  "(SCRIBE_DRIVER_MEMORY) or fewer nodes", file=sys.stderr)
            return 3
        raise
    shutil.rmtree(tmp / POINTS, ignore_errors=True)
    (tmp / OWNER).unlink(missing_ok=True)
    publish(tmp, p.final)
    for stale in _unfinished(p.out_root, name):
        shutil.rmtree(stale, ignore_errors=True)
        run.log(f"removed the unfinished folder {stale.name} of an earlier run that stopped")
    run.log(f"done: outputs in {p.final}")
    for f in sorted(p.final.iterdir()):
        print(f"  {f}")
    return 0


EARLIER_CODE = "# code before a --resume: "


def _code_lines(earlier: Path | None, now: str) -> str:
    """Return params.toml's lines naming the code: earlier code first (from `earlier`), then `now`.

    `earlier` is the params.toml of the interrupted run whose points this run continues.
    """
    lines = []
    if earlier is not None and earlier.is_file():
        for line in earlier.read_text(encoding="utf-8", errors="replace").splitlines():
            before = line.removeprefix("# code: ").removeprefix(EARLIER_CODE)
            if before != line and before != now and EARLIER_CODE + before not in lines:
                lines.append(EARLIER_CODE + before)
    return "".join(f"{line}\n" for line in lines) + f"# code: {now}\n"


def code_version() -> str:
    """Name the code a run used: the package version and, in a git checkout, its commit."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        text = f"scribe-spark {version('scribe-spark')}"
    except PackageNotFoundError:   # shipped as a zip to a cluster, not installed
        text = "scribe-spark (not installed)"
    root = project_root()
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        changed = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):   # no git, or one that does not answer
        return text + ", commit unknown"
    if not commit:
        return text + ", not a git checkout"
    return f"{text}, git {commit}" + (" with uncommitted changes" if changed else "")


def publish(tmp: Path, final: Path) -> None:
    """Rename the finished folder into place, replacing an older result only now."""
    if final.exists():
        old = final.parent / f".{final.name}.old-{os.getpid()}"
        final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(final)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "check":
        print("usage: python -m scribe_spark.cli check EXPERIMENT [ARGS...]", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    sys.exit(check(sys.argv[2], sys.argv[3:]))
