"""Loading parameters: TOML files plus `key=value` overrides into validated frozen dataclasses, and back."""
from __future__ import annotations

import math
import tomllib
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from scribe_spark import knobs
from scribe_spark.config import is_dir, is_file
from scribe_spark.knobs import ConfigError


def parse_override(text: str) -> tuple[str, Any]:
    """Parse `key=value` where value is TOML (bare words are taken as strings)."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key=value")
    key, raw = text.split("=", 1)
    key = key.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


def load(cls: type, path: str | Path | None, overrides: list[str] = ()) -> Any:
    """Return validated parameters of dataclass `cls` from a TOML file plus `key=value` overrides."""
    data: dict = {}
    if path is not None:
        path = Path(path)
        if is_dir(path):
            raise ConfigError(f"--conf {path}: is a folder, not a parameter file")
        if not is_file(path):
            raise ConfigError(f"--conf {path}: config file not found")
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"--conf {path}: not valid TOML: {e}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"--conf {path}: not a TOML file (not UTF-8 text)") from None
        except OSError as e:
            raise ConfigError(f"--conf {path}: cannot read it ({e.strerror})") from None
    for item in overrides:
        key, value = parse_override(item)
        node = data
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"key '{key}': '{p}' is not a table")
        node[parts[-1]] = value
    params = _build(cls, data, "")
    knobs.check(params, data)
    params.validate()
    return params


def _build(cls: type, data: dict, at: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    for key in data:
        if key not in known:
            raise ConfigError(f"key '{at}{key}': unknown parameter (known: {', '.join(sorted(known))})")
    kwargs = {}
    for f in fields(cls):
        if f.name in data:
            kwargs[f.name] = _coerce(hints[f.name], data[f.name], at + f.name)
    return cls(**kwargs)


def _coerce(tp: Any, value: Any, key: str) -> Any:
    if is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"key '{key}': must be a table")
        return _build(tp, value, key + ".")
    origin = typing.get_origin(tp)
    if origin is tuple:
        inner = typing.get_args(tp)[0]
        if not isinstance(value, list):
            value = [value]
        return tuple(_coerce(inner, v, key) for v in value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"key '{key}': must be true or false (got {value!r})")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"key '{key}': must be an integer (got {value!r})")
        _require_64_bits(value, key)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"key '{key}': must be a number (got {value!r})")
        if isinstance(value, int):
            _require_64_bits(value, key)
        if not math.isfinite(value):
            raise ConfigError(f"key '{key}': must be a finite number (got {value!r})")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"key '{key}': must be a string (got {value!r})")
        return value
    raise ConfigError(f"key '{key}': unsupported parameter type {tp}")


def _require_64_bits(value: int, key: str) -> None:
    """Refuse an integer beyond 64 bits: TOML's integers are 64-bit, though Python's parser takes more."""
    if not -2**63 <= value < 2**63:
        raise ConfigError(f"key '{key}': must fit in 64 bits (got {_short(value)})")


def _short(n: int) -> str:
    """Write a long integer by its digit count rather than in full."""
    text = str(n)
    return text if len(text) <= 30 else f"an integer of {len(text.lstrip('-'))} digits"


def to_toml(params: Any) -> str:
    """Return the parameters as TOML text (tables after plain keys)."""
    plain, tables = [], []
    for f in fields(params):
        v = getattr(params, f.name)
        if is_dataclass(v):
            tables.append((f.name, v))
        else:
            plain.append(f"{f.name} = {_toml_value(v)}")
    out = "\n".join(plain) + "\n"
    for name, v in tables:
        out += f"\n[{name}]\n" + "\n".join(f"{g.name} = "
                                           f"{_toml_value(getattr(v, g.name))}" for g in fields(v)) + "\n"
    return out


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")
