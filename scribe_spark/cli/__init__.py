"""The run machinery: command line (`args`), environment knobs and master (`environment`), the run
folder's life (`folder`), how a run ends (`endings`), progress lines (`logs`), a job's entry points (`job`:
`plan`, `check`, `main`) and a job script's life (`start`: `run_job`).

The names are loaded on first use, so that `python -m scribe_spark.cli` can set its signal handler
before the heavier imports.
"""
from __future__ import annotations

from typing import Any

_WHERE = {"check": "job", "main": "job", "plan": "job", "run_job": "start"}
__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'scribe_spark.cli' has no attribute {name!r}")
    from importlib import import_module
    return getattr(import_module(f"scribe_spark.cli.{_WHERE[name]}"), name)
