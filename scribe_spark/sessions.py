"""Session-time laws of churning nodes and session traces: the math alone, below parameters and workloads.

A law gives two draws: a newcomer's whole session, and the residual session of a node already
online when the run starts in steady state (the equilibrium law, density (1 - F(x)) / mean).
For the exponential law both are the same law (it is memoryless); for the others the residual
is longer on average, as the nodes seen online at a random moment are biased to long sessions.
Arrivals at rate nodes / mean keep the expected size steady whatever the law (Little's law).
"""
from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

LAWS = ("exponential", "weibull", "pareto")
TRACE_COLUMNS = ("node", "start_s", "end_s")


@dataclass(frozen=True)
class SessionLaw:
    """A session-time law by its mean and shape (Weibull k > 0; Pareto alpha > 1; unused for exponential)."""

    kind: str
    mean_s: float
    shape: float = 1.0

    def __post_init__(self) -> None:
        """Refuse an unknown law and shapes without a finite mean."""
        if self.kind not in LAWS:
            raise ValueError(f"session law must be one of {', '.join(LAWS)} (got {self.kind!r})")
        if self.kind == "pareto" and not self.shape > 1:
            raise ValueError(f"a Pareto session law needs shape > 1 for a finite mean (got {self.shape})")
        if self.kind == "weibull" and not self.shape > 0:
            raise ValueError(f"a Weibull session law needs shape > 0 (got {self.shape})")

    @classmethod
    def of(cls, p, mean_s: float) -> "SessionLaw":
        """The law a job's parameters name: `session`, with `weibull_shape` or `pareto_shape` as it needs."""
        shape = {"weibull": p.weibull_shape, "pareto": p.pareto_shape}.get(p.session, 1.0)
        return cls(p.session, mean_s, shape)

    @property
    def scale(self) -> float:
        """The law's scale: the exponential mean, Weibull's lambda, Pareto's minimum x_m."""
        if self.kind == "weibull":
            return self.mean_s / math.gamma(1 + 1 / self.shape)
        if self.kind == "pareto":
            return self.mean_s * (self.shape - 1) / self.shape
        return self.mean_s

    @property
    def median(self) -> float:
        """The law's median session (s): the mean times ln 2 for the exponential, lambda (ln 2)^(1/k) for
        Weibull, x_m 2^(1/alpha) for Pareto."""
        if self.kind == "weibull":
            return self.scale * math.log(2) ** (1 / self.shape)
        if self.kind == "pareto":
            return self.scale * 2 ** (1 / self.shape)
        return self.mean_s * math.log(2)

    def sessions(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Whole sessions of `n` newcomers (s)."""
        if self.kind == "weibull":
            return self.scale * rng.weibull(self.shape, n)
        if self.kind == "pareto":
            return self.scale * (1 + rng.pareto(self.shape, n))   # numpy's Pareto is Lomax: shift by 1
        return rng.exponential(self.mean_s, n)

    def residuals(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """What remains of the sessions of `n` nodes online at a random moment of the steady state (s)."""
        if self.kind == "weibull":
            # F_e(x) = P(1/k, (x / lambda)^k): (x / lambda)^k is Gamma(1/k, 1)
            return self.scale * rng.gamma(1 / self.shape, 1.0, n) ** (1 / self.shape)
        if self.kind == "pareto":
            # F_e(x) = x / mean below x_m, 1 - (x_m / x)^(alpha - 1) / alpha above: invert it
            a, u = self.shape, rng.random(n)
            low = u <= (a - 1) / a
            out = np.empty(n)
            out[low] = u[low] * self.mean_s
            out[~low] = self.scale * (a * (1 - u[~low])) ** (-1 / (a - 1))
            return out
        return rng.exponential(self.mean_s, n)


def read_trace(path: str | Path) -> pd.DataFrame:
    """Read a session trace (CSV: node, start_s, end_s; one row per session); raise ValueError naming
    the first problem. Rows come back sorted by start, then node. A file is parsed once per process (while
    unchanged): the check, the ring's size and the run all read it; each caller gets its own copy."""
    try:
        st = os.stat(path)
    except OSError:
        return _parse_trace(path)   # which names the reason
    return _parsed_trace(str(Path(path).resolve()), st.st_mtime_ns, st.st_size).copy()


@functools.lru_cache(maxsize=4)
def _parsed_trace(path: str, _mtime_ns: int, _size: int) -> pd.DataFrame:
    """`_parse_trace`'s frame for a file's version (its path, time of change and size)."""
    return _parse_trace(path)


def _parse_trace(path: str | Path) -> pd.DataFrame:
    """`read_trace`'s work: parse and check the file."""
    try:
        # blank lines kept while reading, so that a row's number is its line in the file
        t = pd.read_csv(path, skip_blank_lines=False)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read it as CSV ({e})") from None
    if tuple(t.columns) != TRACE_COLUMNS:
        got = ",".join(map(str, t.columns))
        raise ValueError(f"its header must be {','.join(TRACE_COLUMNS)} (got {got})")
    t = t[~t.isna().all(axis=1)]
    t.index = t.index + 2          # the line of each row in the file, the header being line 1
    if t.empty:
        raise ValueError("it has no sessions")
    for c in ("start_s", "end_s"):
        values = pd.to_numeric(t[c], errors="coerce")
        bad = ~np.isfinite(values.to_numpy(dtype=float))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"line {t.index[row]}: {c} must be a finite number (got {t[c].iloc[row]!r})")
        t[c] = values.astype(float)
    short = np.flatnonzero(~(t.start_s.to_numpy() < t.end_s.to_numpy()))
    if len(short):
        raise ValueError(f"line {t.index[short[0]]}: a session must end after it starts")
    t["node"] = t["node"].astype(str)
    t = t.sort_values(["start_s", "node"], kind="stable")
    for node, s in t.groupby("node", sort=False):
        overlap = np.flatnonzero(s.start_s.to_numpy()[1:] < s.end_s.to_numpy()[:-1])
        if len(overlap):
            raise ValueError(f"line {s.index[overlap[0] + 1]}: node {node!r} has overlapping sessions")
    return t.reset_index(drop=True)


Times = float | list[float] | tuple[float, ...]


def outages(crashes: dict[int, Times], leaves: dict[int, Times] | None = None,
            returns: dict[int, Times] | None = None) -> list[tuple[int, float, float, bool]]:
    """Each node's down intervals (node, down, up, graceful), by node then time, from {node: time or
    times} of its crashes, graceful leaves and returns (up inf: not back); raise ValueError unless each
    node alternates, down then back then down again, every time after the one before."""
    def times(of: dict[int, Times] | None) -> dict[int, list[float]]:
        return {int(v): [float(t) for t in (ts if isinstance(ts, (list, tuple)) else [ts])]
                for v, ts in (of or {}).items()}
    crash, leave, back = times(crashes), times(leaves), times(returns)
    out = []
    for v in sorted(set(crash) | set(leave) | set(back)):
        downs = sorted([(t, False) for t in crash.get(v, [])] + [(t, True) for t in leave.get(v, [])])
        ups = sorted(back.get(v, []))
        if len(ups) > len(downs):
            raise ValueError("a node comes back only after it went down")
        ups += [math.inf] * (len(downs) - len(ups))
        flat = [t for (d, _), u in zip(downs, ups) for t in (d, u)]
        if not all(a < b for a, b in zip(flat, flat[1:])):
            raise ValueError(f"node {v} must go down and come back in turn, each time after the one before")
        out += [(v, d, u, graceful) for (d, graceful), u in zip(downs, ups)]
    return out
