"""Bad inputs for every declared parameter of every experiment and for every SCRIBE_* knob.

Run as a script, it checks each case with the job's pre-start check in this one process and prints
one JSON line per case (exit code, stderr lines, seconds), then one line saying whether anything of
Spark was loaded; tests/test_fuzz.py reads that. The values come from the declarations: a value of
the wrong type, NaN and infinities, one step past each end of the range, zero and negatives where
the range excludes them, numbers beyond 64 bits, empty and repeated lists, unknown choices, and a
knob set where another knob makes it meaningless.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scribe_spark.experiments.registry import JOBS  # noqa: E402
from scribe_spark.knobs import Knob, declared, default_of  # noqa: E402


def toml(value: Any) -> str:
    """A value as a TOML literal for --set."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        named = {float("inf"): "inf", float("-inf"): "-inf"}
        return named.get(value, "nan" if value != value else repr(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    return str(value)


def _numbers(kind: type, k: Knob) -> Iterator[Any]:
    """Out-of-range numbers for a knob of type `kind` (int or float)."""
    if kind is float:
        yield from (float("nan"), float("inf"), float("-inf"))
    if k.lo is not None:
        yield (k.lo if k.lo_open else k.lo - 1) if kind is int else (k.lo if k.lo_open else k.lo - 1e-3)
        if k.lo >= 0:
            yield -1
        if k.lo > 0 or k.lo_open:
            yield 0
    if k.hi is not None:
        yield (k.hi if k.hi_open else k.hi + 1) if kind is int else (k.hi if k.hi_open else k.hi * 2 + 1)
        yield 2**63 if kind is int else 1e300
    yield 10**400 if kind is int else "1" + "0" * 400   # beyond 64 bits / a float TOML cannot hold


def bad_values(tp: Any, k: Knob, default: Any) -> Iterator[str]:
    """TOML literals a knob of type `tp` must refuse."""
    if typing.get_origin(tp) is tuple:
        inner = typing.get_args(tp)[0]
        if k.min_items:
            yield "[]"
        if k.distinct and default:
            yield toml([default[0], default[0]])
        for v in bad_values(inner, k, default[0] if default else None):
            yield f"[{v}]"
        return
    if tp is bool:
        yield from ("1", '"yes"', "[true]")
        return
    if tp is str:
        yield from ("1", "[]")
        if k.choices is not None or k.check is not None:
            yield toml("no-such-choice")
        return
    yield from ('"many"', "true", "[]")
    if k.choices is not None:
        yield toml(max(k.choices) + 1)
        return
    for v in _numbers(tp, k):
        yield v if isinstance(v, str) else toml(v)


def cases() -> Iterator[tuple[str, str, list[str]]]:
    """(job, key, extra arguments) for every bad value of every declared knob of every job."""
    for name, job in JOBS.items():
        yield from _cases_of(name, job.params, "")


def _cases_of(name: str, cls: type, at: str) -> Iterator[tuple[str, str, list[str]]]:
    hints = typing.get_type_hints(cls)
    knobs = declared(cls)
    for f in fields(cls):
        key = at + f.name
        tp, default = hints[f.name], default_of(f)
        k = knobs[f.name]
        if is_dataclass(tp):
            yield name, key, ["--set", f"{key}=1"]          # a table given as a number
            yield from _cases_of(name, tp, key + ".")
            # set where another knob makes it meaningless (where that knob's default does not want it)
            others = {g.name: default_of(g) for g in fields(cls)}
            if k.only_with is not None and others.get(k.only_with[0], k.only_with[1]) != k.only_with[1]:
                first = fields(tp)[0].name
                yield name, key, ["--set", f"{key}.{first}={toml(default_of(fields(tp)[0]) + 1)}"]
            continue
        for v in bad_values(tp, k, default):
            yield name, key, ["--set", f"{key}={v}"]
        if k.only_with is not None and not at:
            other, wanted = k.only_with
            if other in hints and default != _a_value(tp, k):
                yield name, key, ["--set", f"{key}={toml(_a_value(tp, k))}"]


def _a_value(tp: Any, k: Knob) -> Any:
    """A good value of a knob other than its default, to set where it has no effect."""
    return "latency.npy" if tp is str else 1


def env_cases() -> Iterator[tuple[str, str]]:
    """(variable, bad value) for every SCRIBE_* knob, and a variable that is not a knob."""
    from scribe_spark.cli.environment import KNOBS
    for name, knob in KNOBS.items():
        if knob.kind == "folder":
            yield from ((name, ""), (name, "/proc/no/such/folder"))
        elif knob.kind == "heap":
            for v in ("", "lots", "0g", "3gb", "1.5g", "-1g", "512m", "8", "8 g", "99999999999999999999t"):
                yield name, v
        else:
            for v in ("", "1.5", "1e3", "eight", "-1", str(knob.lo - 1), str(knob.hi + 1), "9" * 30):
                yield name, v
    yield "SCRIBE_DRIVER_MEM", "8g"


def _timed(call, *args) -> tuple[int, list[str], float]:
    err = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = call(*args)
        except SystemExit as e:
            code = e.code
    return code, err.getvalue().splitlines(), time.perf_counter() - t0


def main(out: str) -> None:
    """Check every case; print one JSON line each, then whether Spark was loaded."""
    from scribe_spark.cli.job import check, check_cluster_environment
    for name, key, args in cases():
        code, err, secs = _timed(check, name, [*args, "--out", out])
        print(json.dumps({"job": name, "key": key, "args": args, "code": code, "err": err, "secs": secs}))
    saved = dict(os.environ)
    for var, value in env_cases():
        os.environ.clear()
        os.environ.update({k: v for k, v in saved.items() if not k.startswith("SCRIBE_")}, **{var: value})
        from scribe_spark.cli.environment import KNOBS
        scope = KNOBS[var].scope if var in KNOBS else "job"
        if scope == "cluster":
            code, err, secs = _timed(check_cluster_environment)
        else:
            code, err, secs = _timed(check, "pastry_hops", ["--out", out])
        print(json.dumps({"env": var, "value": value, "code": code, "err": err, "secs": secs}))
    os.environ.clear()
    os.environ.update(saved)
    print(json.dumps({"spark_loaded": "pyspark" in sys.modules or "py4j" in sys.modules}))


if __name__ == "__main__":
    main(sys.argv[1])
