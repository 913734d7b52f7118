"""A run folder's life: checked before the run, written while hidden, published whole, resumed after a stop.

A run writes into `<out>/.<experiment>.tmp-<pid>`, keeps each finished sweep point there, and
renames the folder to `<out>/<experiment>` only when the run completed. `--resume` continues
the unfinished folder of a dead run with the same parameters (the same digest).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from scribe_spark import loader
from scribe_spark.cli.args import UsageError, project_root
from scribe_spark.experiments.run import POINTS

OWNER = ".owner"         # pid and start time of the process writing the temporary folder
EARLIER_CODE = "# code before a --resume: "


def probe_out(out: Path, name: str) -> None:
    """Create what is missing of `out` and the run's hidden folder in it, then remove them: a real probe.

    Permission bits do not tell root about read-only or virtual file systems, and a name the file
    system refuses (too long, say) shows only when it is made; nothing made here is left behind.
    """
    made: list[Path] = []
    try:
        if out.exists() and not out.is_dir():
            raise UsageError(f"--out {out}: exists and is not a folder")
        existing = next(d for d in (out, *out.parents) if d.exists())
        if not existing.is_dir():
            raise UsageError(f"--out {out}: cannot create it, {existing} is not a folder")
        for d in reversed([d for d in (out, *out.parents) if not d.exists()]):
            d.mkdir()
            made.append(d)
        os.rmdir(tempfile.mkdtemp(prefix=f".{name}.probe-", dir=out))   # not .<name>.tmp-*: never a run
    except OSError as e:
        where = e.filename if e.filename else out
        raise UsageError(f"--out {out}: cannot create or write {where} ({e.strerror})") from None
    finally:
        for d in reversed(made):
            try:
                d.rmdir()
            except OSError:
                pass


# ------------------------------------------------------------------ unfinished runs

def process_start(pid: int) -> str | None:
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


def alive(tmp: Path) -> bool:
    """True if the process that owns an unfinished run folder is still running."""
    try:
        pid, start = (tmp / OWNER).read_text().split()
    except (OSError, ValueError):
        return False
    now = process_start(int(pid))
    return now is not None and (now == start or "?" in (now, start))


def unfinished(out_root: Path, name: str) -> list[Path]:
    """Return the temporary folders of runs of `name` in out_root whose process is gone, most points first."""
    found = [d for d in out_root.glob(f".{name}.tmp-*") if d.is_dir() and not alive(d)]
    return sorted(found, key=lambda d: (-points_in(d), d.name))


def points_in(folder: Path) -> int:
    """The finished sweep points a run folder holds."""
    return len(list((folder / POINTS).glob("*.pkl")))


def digest_of(folder: Path) -> str | None:
    """The parameter digest a run folder's params.toml names."""
    try:
        head = (folder / "params.toml").read_text().splitlines()[:3]
    except OSError:
        return None
    return next((line.split(":", 1)[1].strip() for line in head if line.startswith("# digest:")), None)


def difference(params: Any, folder: Path) -> str:
    """Name the first parameter whose value differs between `params` and a saved run."""
    try:
        theirs = tomllib.loads((folder / "params.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return "its params.toml is missing or unreadable"
    ours = tomllib.loads(loader.to_toml(params))

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


def resumable(out_root: Path, name: str, digest: str, params: Any) -> Path | None:
    """Return the unfinished folder --resume continues (None: start afresh); refuse other parameters."""
    if not out_root.is_dir():
        return None
    stale = unfinished(out_root, name)
    same = [d for d in stale if digest_of(d) == digest]
    if same:
        return same[0]
    if stale:
        raise UsageError(f"--resume: the unfinished run {stale[0]} has other parameters "
                         f"({difference(params, stale[0])}); run without --resume to start afresh")
    running = [d for d in out_root.glob(f".{name}.tmp-*") if d.is_dir() and alive(d)]
    if running:
        raise UsageError(f"--resume: the run writing {running[0]} is still going")
    return None


def claim(out_root: Path, name: str, continued: Path | None) -> Path:
    """Make (or take over, for --resume) this process's hidden run folder and mark it as ours."""
    out_root.mkdir(parents=True, exist_ok=True)
    tmp = out_root / f".{name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    if continued is not None:
        continued.rename(tmp)   # claim it: a second --resume cannot take the same folder
    else:
        tmp.mkdir()
    (tmp / OWNER).write_text(f"{os.getpid()} {process_start(os.getpid()) or '?'}\n")
    return tmp


def abandon(tmp: Path) -> int:
    """After a stop: keep the folder for --resume if it holds points (return how many), else remove it."""
    for part in (tmp / POINTS).glob("*.part"):
        part.unlink(missing_ok=True)
    points = points_in(tmp)
    if points:
        (tmp / OWNER).unlink(missing_ok=True)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return points


def finish(tmp: Path, final: Path, name: str) -> list[str]:
    """Publish a completed folder and remove the unfinished folders of dead runs; return what was removed."""
    shutil.rmtree(tmp / POINTS, ignore_errors=True)
    (tmp / OWNER).unlink(missing_ok=True)
    publish(tmp, final)
    removed = []
    for stale in unfinished(final.parent, name):
        shutil.rmtree(stale, ignore_errors=True)
        removed.append(stale.name)
    return removed


def publish(tmp: Path, final: Path) -> None:
    """Rename the finished folder into place, replacing an older result only now."""
    if final.exists():
        old = final.parent / f".{final.name}.old-{os.getpid()}"
        final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(final)


# ------------------------------------------------------------------ params.toml

def write_params(tmp: Path, name: str, conf: Path, digest: str, params: Any, rerun: str, kept: int) -> None:
    """Write params.toml: the resolved parameters, their digest, the code that ran and how to rerun them."""
    code = code_lines(tmp / "params.toml" if kept else None, code_version())
    (tmp / "params.toml").write_text(f"# resolved parameters of {name} (conf: {conf})\n"
                                     f"# digest: {digest}\n" + code +
                                     f"# rerun: {rerun}\n" + loader.to_toml(params))


def code_lines(earlier: Path | None, now: str) -> str:
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
