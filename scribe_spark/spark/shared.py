"""Read-only arrays every task reads, shipped once per machine as memory-mapped files.

A broadcast variable is unpickled into each Python worker, so an executor with 15 workers holds 15
copies of the ring (about 52 B per node each, plus the router delays). `share` writes an object's
large arrays once as `.npy` files, ships them with `SparkContext.addFile` (once per executor; on a
local master the workers map the driver's files themselves) and broadcasts a small stub in their
place: each worker maps its executor's files read-only, and the operating system's page cache holds
one copy for all of that executor's workers (one per machine with one executor per machine, and one
for the driver and its workers on a local master).
"""
from __future__ import annotations

import atexit
import logging
import mmap
import os
import shutil
import tempfile
import uuid
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from pyspark import SparkContext, SparkFiles
from pyspark.broadcast import Broadcast

from scribe_spark import sizes

_log = logging.getLogger(__name__)

SHARED_MIN_BYTES = 1 << 16     # arrays smaller than this travel inside the broadcast stub
_FOLDERS: list[Path] = []     # the driver's folders, removed when released or the process ends
_OPENED: dict[str, Any] = {}  # a worker's mapped objects, by share key
_LOCAL_FILES: dict[str, list[str]] = {}   # the driver's files each of them maps, on a local master
_SHARED: dict[tuple[int, str], Broadcast] = {}   # the driver's shares of objects with a token, reused
_LIVE: dict[int, Broadcast] = {}   # the driver's other shares not yet released, by serial
_TIED: dict[str, tuple[int, Path]] = {}   # folders that go with a token's share (`tie`): serial, folder
_serial = 0                   # of the last share or tie made (`mark`)
PREFIX = "scribe-shared-"     # then the driver's pid: a folder whose process is gone is swept

T = TypeVar("T")


def _cleanup() -> None:
    """Remove the driver's folders of shared files (Spark removes its own copies when it stops)."""
    for folder in _FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)


atexit.register(_cleanup)


class _Mapped:
    """A pickled reference to one shared array: the name of its file among SparkFiles."""

    def __init__(self, file: str) -> None:
        self.file = file


def _open_array(file: str) -> np.ndarray:
    """Map one shared array read-only: the driver's own file on a local master (an absolute path), else
    where SparkFiles fetched it on this executor."""
    return np.load(file if os.path.isabs(file) else SparkFiles.get(file), mmap_mode="r")


def _save(path: Path, value: np.ndarray) -> None:
    """Write an array as a `.npy` file: a link to its own file where it is one mapped whole (a ring
    sorted in Spark, `workloads/ring_files.py`), which costs no copy on the same disk."""
    if isinstance(value, np.memmap) and isinstance(value.base, mmap.mmap) and value.filename:
        if value.mode != "r":
            value.flush()         # the file, not the map, is what the workers read
        try:
            os.link(value.filename, path)
            return
        except OSError:
            pass                  # another disk: copied below
    np.save(path, np.ascontiguousarray(value))


def _stub(obj: Any, folder: Path, prefix: str, local: bool) -> _Frozen:
    """Write a dataclass's large arrays (fields and attributes `__post_init__` derived) to `folder`;
    return it frozen, with those arrays `_Mapped` and dataclass fields frozen in turn."""
    values: dict[str, Any] = {}
    for name, value in vars(obj).items():
        if isinstance(value, np.ndarray) and value.nbytes >= SHARED_MIN_BYTES:
            file = f"{prefix}.{name}.npy"
            _save(folder / file, value)
            value = _Mapped(str(folder / file) if local else file)
        elif is_dataclass(value) and not isinstance(value, type):
            value = _stub(value, folder, f"{prefix}.{name}", local)
        values[name] = value
    return _Frozen(type(obj), values)


class _Frozen:
    """A dataclass instance by its class and attributes, rebuilt on unpickling without running
    `__post_init__` (whose work, such as the ring's sort, was done on the driver)."""

    def __init__(self, cls: type, values: dict[str, Any]) -> None:
        self.cls, self.values = cls, values


def _rebuild(frozen: _Frozen | _Mapped) -> Any:
    """The object again, its arrays mapped from this executor's copies of the files."""
    if isinstance(frozen, _Mapped):
        return _open_array(frozen.file)
    obj = object.__new__(frozen.cls)
    for k, v in frozen.values.items():
        if isinstance(v, _Mapped):
            v = _open_array(v.file)
        elif isinstance(v, _Frozen):
            v = _rebuild(v)
        object.__setattr__(obj, k, v)
    return obj


def _thaw(key: str, frozen: _Frozen | _Mapped) -> Any:
    """Unpickling a shared object in a worker: map its arrays once per process."""
    if key not in _OPENED:
        for gone in [k for k, files in _LOCAL_FILES.items() if not all(os.path.exists(f) for f in files)]:
            del _OPENED[gone], _LOCAL_FILES[gone]   # released: unmapped, so that their disk space returns
        if len(_OPENED) > 16:     # a run shares a few objects at a time; maps are cheap to reopen
            _OPENED.clear()
            _LOCAL_FILES.clear()
        _OPENED[key] = _rebuild(frozen)
        _LOCAL_FILES[key] = [f for f in _files(frozen) if os.path.isabs(f)]
    return _OPENED[key]


def _files(frozen: _Frozen | _Mapped) -> list[str]:
    """The files a frozen object's arrays are mapped from."""
    if isinstance(frozen, _Mapped):
        return [frozen.file]
    return [f for v in frozen.values.values() if isinstance(v, (_Frozen, _Mapped)) for f in _files(v)]


class _Shared:
    """What the broadcast carries: a key and the object with its large arrays left out."""

    def __init__(self, key: str, frozen: _Frozen | _Mapped) -> None:
        self.key, self.frozen = key, frozen

    def __reduce__(self) -> tuple:
        return _thaw, (self.key, self.frozen)


def _sweep(scratch: str) -> None:
    """Remove the shared folders of drivers that are gone (killed before they could clean up)."""
    for folder in Path(scratch).glob(f"{PREFIX}*-*"):
        pid = folder.name[len(PREFIX):].split("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            pass                  # alive, under another user


def new_folder(tag: str = "") -> Path:
    """A new folder of the driver's beside Spark's scratch files, removed when the process ends."""
    scratch = sizes.scratch_dir()
    _sweep(scratch)
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-{tag}", dir=scratch))
    _FOLDERS.append(folder)
    return folder


def _write(obj: Any, key: str, local: bool) -> tuple[Path, _Frozen | _Mapped]:
    """Write an object's large arrays in a new folder beside Spark's scratch files (SPARK_LOCAL_DIRS,
    the disk a user points at for large runs); return the folder and the object's frozen form."""
    folder = Path(sizes.scratch_dir())
    try:
        folder = new_folder()
        if isinstance(obj, np.ndarray):
            np.save(folder / f"{key}.npy", np.ascontiguousarray(obj))
            return folder, _Mapped(str(folder / f"{key}.npy") if local else f"{key}.npy")
        return folder, _stub(obj, folder, key, local)
    except OSError as e:         # name the folder: a write's error names no file
        raise OSError(e.errno, e.strerror, str(folder)) from e


def share(sc: SparkContext, obj: T) -> Broadcast:
    """Broadcast an array, or a dataclass whose large NumPy arrays (its own, or those of dataclass
    fields), so that the arrays reach every worker as read-only memory-mapped files, one copy per
    executor. An object with a `token` (a ring) is shared once per SparkContext, until `forget` or
    `free_since`. The broadcast's value is the object in the workers; on the driver, use the object
    itself."""
    token = getattr(obj, "token", None)
    if token is not None and (id(sc), token) in _SHARED:
        return _SHARED[(id(sc), token)]
    key = uuid.uuid4().hex
    # on a local master the workers map the driver's files themselves: Spark would copy each added file
    # into a folder of its own, a second copy on disk and in the page cache beside the driver's
    local = sc.master.startswith("local")
    folder, frozen = _write(obj, key, local)
    for file in sorted(folder.iterdir()) if not local else ():
        sc.addFile(str(file))     # files, not the folder: addFile takes no local folder on a cluster
    size = sum(p.stat().st_size for p in folder.iterdir())
    _log.debug(f"shared {type(obj).__name__}: {size / 2**20:.1f} MiB in {folder}")
    bc = sc.broadcast(_Shared(key, frozen))
    bc._scribe_serial = _next()
    if token is not None:         # reused until `forget`
        bc._scribe_kept = (folder, local)
        _SHARED[(id(sc), token)] = bc
        return bc
    bc._scribe_share = (folder, local)   # for `release`
    _LIVE[bc._scribe_serial] = bc
    return bc


def _next() -> int:
    """A new serial number."""
    global _serial
    _serial += 1
    return _serial


def mark() -> int:
    """A mark of what is shared now: `free_since` frees only what comes after it."""
    return _serial


def tie(token: str, folder: Path) -> None:
    """Remove `folder` (one of `new_folder`'s) when the share of the object with `token` is forgotten."""
    _TIED[token] = (_next(), folder)


def forget(sc: SparkContext, obj: Any) -> None:
    """Free the share of an object with a token (a ring), and the folders tied to it, once no task will
    read it again, as `release` frees the others; sharing the object again writes it anew. Does nothing
    if it has no share."""
    token = getattr(obj, "token", None)
    bc = _SHARED.pop((id(sc), token), None)
    if bc is not None:
        _release_kept(bc)
    if token in _TIED:
        remove_folder(_TIED.pop(token)[1])


def _release_kept(bc: Broadcast) -> None:
    """Release a share made by token, as `release` does the others."""
    bc._scribe_share = bc.__dict__.pop("_scribe_kept")
    release(bc)


def free_since(since: int) -> None:
    """Free every share and tied folder made after the mark `since` (a job's, once the job has ended:
    nothing reads them again, and the next job in the same driver makes its own)."""
    for key in [k for k, bc in _SHARED.items() if bc._scribe_serial > since]:
        _release_kept(_SHARED.pop(key))
    for serial in [k for k in _LIVE if k > since]:
        release(_LIVE[serial])
    for token in [t for t, (serial, _) in _TIED.items() if serial > since]:
        remove_folder(_TIED.pop(token)[1])


def remove_folder(folder: Path) -> None:
    """Remove one of the driver's folders (`new_folder`) before the process ends."""
    shutil.rmtree(folder, ignore_errors=True)
    if folder in _FOLDERS:
        _FOLDERS.remove(folder)


def release(bc: Broadcast) -> None:
    """Free a share (made without a token) once no task will read it again: every frame computed from
    it materialized, none to be recomputed. Its broadcast is destroyed, and on a local master its files
    removed (each worker unmaps them when it next opens a share); on a cluster they stay until the driver
    ends, as Spark keeps offering every added file to the executors that have not fetched it. Releasing
    twice, or what is not a share (or a share made by token, which `forget` frees), does nothing."""
    folder, local = getattr(bc, "_scribe_share", (None, False))
    if folder is None:
        return
    del bc._scribe_share
    _LIVE.pop(bc._scribe_serial, None)
    bc.destroy()
    if local:
        remove_folder(folder)
