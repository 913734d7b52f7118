"""Declared parameters: each knob says what it means, its unit and the values the code can run.

A parameter class declares every field with `knob(default, doc, ...)`. The loader checks each
value against its declaration (type first, then the range or the choices), so a value that passes
is one the simulation can run; the checks that relate several knobs stay in the class's
`validate`. The same declarations feed the docs' parameter tables and the tests' fuzzing.
"""
from __future__ import annotations

import math
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from typing import Any, Callable

INT_MAX = 2**63 - 1        # TOML's integers are 64-bit
COUNT_MAX = 2**31 - 1      # node, topic and client numbers are stored as 32-bit integers


class ConfigError(ValueError):
    """A parameter is unknown, of the wrong type, or impossible."""


@dataclass(frozen=True)
class Knob:
    """What a parameter means and which values it takes."""

    doc: str
    unit: str = ""
    lo: float | None = None            # smallest value (excluded when lo_open)
    hi: float | None = None            # largest value (excluded when hi_open)
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple[Any, ...] | None = None
    check: Callable[[Any], str | None] | None = None   # an element's own check: the reason, or None
    min_items: int = 0                 # lists: the fewest values
    distinct: bool = True              # lists: each value once (each is one sweep point)
    only_with: tuple[str, Any] | None = None   # (key, value): the knob matters only when key == value
    why_hi: str = ""                   # why the upper bound is what it is

    def bounds(self) -> str:
        """The allowed values in words: '1..64', '(0, 1]', one of a list."""
        if self.choices is not None:
            return "one of " + ", ".join(str(c) for c in self.choices)
        if self.lo is None and self.hi is None:
            return ""
        if _integral(self.lo) and _integral(self.hi) and not (self.lo_open or self.hi_open):
            return f"{_num(self.lo)}..{_num(self.hi)}"
        return f"{'(' if self.lo_open else '['}{_num(self.lo)}, {_num(self.hi)}{')' if self.hi_open else ']'}"

    def refuse(self, value: Any) -> str | None:
        """The reason one value (a list's element) is refused, or None."""
        if self.choices is not None and value not in self.choices:
            return f"must be {self.bounds()}"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            low = self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo)
            high = self.hi is not None and (value >= self.hi if self.hi_open else value > self.hi)
            if low or high:
                why = f" ({self.why_hi})" if high and self.why_hi else ""
                return f"must be in {self.bounds()}{why}"
        return self.check(value) if self.check is not None else None


def knob(default: Any, doc: str, **declared: Any) -> Any:
    """Declare a dataclass field with its default and its `Knob`."""
    meta = {"knob": Knob(doc, **declared)}
    if is_dataclass(default) and not isinstance(default, type):
        return field(default_factory=type(default), metadata=meta)
    return field(default=default, metadata=meta)


def count(default: int, doc: str, lo: int = 1, hi: int = COUNT_MAX, **declared: Any) -> Any:
    """Declare a count: an integer from `lo` (default 1) up to what 32-bit numbering holds."""
    why = declared.pop("why_hi", "" if hi != COUNT_MAX else "numbers are stored in 32 bits")
    return knob(default, doc, lo=lo, hi=hi, why_hi=why, **declared)


def share(default: float, doc: str, hi_open: bool = False, lo_open: bool = False, **declared: Any) -> Any:
    """Declare a share or probability in [0, 1] (either end may be excluded)."""
    return knob(default, doc, lo=0.0, hi=1.0, lo_open=lo_open, hi_open=hi_open, **declared)


def declared(cls: type) -> dict[str, Knob]:
    """Each field's knob, by name (a field declared without one is absent)."""
    return {f.name: f.metadata["knob"] for f in fields(cls) if "knob" in f.metadata}


def default_of(f: Field) -> Any:
    """A field's default value."""
    return f.default_factory() if f.default is MISSING else f.default


def check(params: Any, given: dict, at: str = "") -> None:
    """Check every declared value of `params` and refuse knobs given where they have no effect."""
    for f in fields(params):
        value, spec = getattr(params, f.name), f.metadata.get("knob")
        key = at + f.name
        if is_dataclass(value):
            check(value, given.get(f.name, {}) if isinstance(given.get(f.name), dict) else {}, key + ".")
        if spec is None:
            continue
        _check_value(key, value, spec)
        if spec.only_with and f.name in given and value != default_of(f):
            other, wanted = spec.only_with
            if getattr(params, other, wanted) != wanted:
                raise ConfigError(f"key '{key}': only used with {other} = {wanted!r} (here {other} = "
                                  f"{getattr(params, other)!r}); remove it or set {other} = {wanted!r}")


def _check_value(key: str, value: Any, spec: Knob) -> None:
    if isinstance(value, tuple):
        if len(value) < spec.min_items:
            raise ConfigError(f"key '{key}': must list at least {spec.min_items} value"
                              f"{'s' if spec.min_items > 1 else ''} (got {list(value)!r})")
        if spec.distinct and len(set(value)) != len(value):
            raise ConfigError(f"key '{key}': values must be distinct (each is one sweep point) "
                              f"(got {list(value)!r})")
        for v in value:
            _check_one(key, v, spec, "every value ")
    elif not is_dataclass(value):
        _check_one(key, value, spec, "")


def _check_one(key: str, value: Any, spec: Knob, every: str) -> None:
    reason = spec.refuse(value)
    if reason:
        raise ConfigError(f"key '{key}': {every}{reason} (got {_shown(value)})")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _integral(x: float | None) -> bool:
    return x is not None and float(x).is_integer() and isinstance(x, int)


def _num(x: float | None) -> str:
    if x is None:
        return "inf"
    if x == INT_MAX:
        return "2^63 - 1"
    if isinstance(x, int):
        return f"{x:,}" if abs(x) < 10**15 else f"{x:.3g}"
    if math.isfinite(x) and x == int(x) and abs(x) < 1e7:
        return f"{int(x):,}" if abs(x) >= 1000 else f"{x:g}"
    return f"{x:g}"
