"""What an experiment gets from the run machinery: its parameters, its output folder, progress lines, and
sweep points that survive a stop (`--resume`)."""
from __future__ import annotations

import logging
import os
import pickle
import re
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

log = logging.getLogger("scribe_spark")
T = TypeVar("T")
POINTS = ".points"       # finished sweep points inside the run's hidden folder


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

    def saved_file(self, name: str) -> Path:
        """A path beside the saved sweep points (kept by an interrupted run, gone with the finished run)."""
        folder = self.folder / POINTS
        folder.mkdir(exist_ok=True)
        return folder / name

    def point(self, key: str, compute: Callable[[], T]) -> T:
        """One sweep point's result: saved by an interrupted run (--resume), else computed and saved."""
        if key in self._points:
            return self._points[key]
        f = self.saved_file(re.sub(r"[^A-Za-z0-9_.=-]+", "_", key) + ".pkl")
        if f.exists():
            self.log(f"{key}: taken from the interrupted run")
            self._points[key] = pickle.loads(f.read_bytes())
            return self._points[key]
        value = self._points[key] = compute()
        part = f.with_suffix(".part")
        part.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(part, f)
        return value
