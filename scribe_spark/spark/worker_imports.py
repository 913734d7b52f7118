"""Spark's Python workers on Python 3.10 and 3.11: stop re-reading zip archives before every task.

Before each task a PySpark worker calls `importlib.invalidate_caches()`. On Python 3.10 and 3.11
that makes every zip importer re-read its archive's directory (CPython gh-103200, fixed in 3.12),
and a worker's path holds pyspark.zip (one importer per package imported from it) and Spark's
core jar: about 0.2 s of CPU per task, half of a small job's Python time. Here an importer
re-reads its archive only when the file changed (size or modification time), which keeps what
invalidation is for. Nothing else about imports changes.
"""
from __future__ import annotations

import os
import sys
import zipimport

_STAMP = "_scribe_spark_stamp"


def _stamp(archive: str) -> tuple[int, int] | None:
    """The archive's (size, mtime in ns), or None if it cannot be read."""
    try:
        st = os.stat(archive)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _invalidate_when_changed(original):
    """Wrap zipimporter.invalidate_caches: re-read the directory only if the archive changed."""
    def invalidate_caches(self: zipimport.zipimporter) -> None:
        stamp = _stamp(self.archive)
        if stamp is not None and getattr(self, _STAMP, None) == stamp:
            return
        original(self)
        setattr(self, _STAMP, stamp)
    invalidate_caches.__doc__ = original.__doc__
    invalidate_caches.scribe_spark = True
    return invalidate_caches


def install() -> bool:
    """In a PySpark worker on Python 3.10–3.11, make zip re-reads lazy; return whether it did."""
    if not (3, 10) <= sys.version_info[:2] < (3, 12) or "pyspark.worker" not in sys.modules:
        return False
    current = zipimport.zipimporter.invalidate_caches   # present from 3.10 on
    if getattr(current, "scribe_spark", False):
        return False
    zipimport.zipimporter.invalidate_caches = _invalidate_when_changed(current)
    return True
