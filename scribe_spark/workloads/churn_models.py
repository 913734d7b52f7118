"""Churn workloads: who is online at the start and who arrives when, by a session law or a trace."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from scribe_spark.sessions import SessionLaw


@dataclass(frozen=True)
class LawChurn:
    """Churn by a session law: `nodes` online at the start, Poisson arrivals at nodes / mean."""

    law: SessionLaw
    nodes: int

    @property
    def universe(self) -> int:
        """Node ids the run may use: the first `nodes` online at the start, a pool of newcomers after."""
        return 2 * self.nodes

    def start(self, rng: np.random.Generator) -> np.ndarray:
        """The session ends (s) of the nodes online at time 0 (ids 0..nodes-1)."""
        return self.law.residuals(rng, self.nodes)

    def arriving(self, until: float, span: float, rng: np.random.Generator) -> np.ndarray:
        """The session ends (s) of the newcomers arriving in the `span` s before `until`, who join then."""
        k = rng.poisson(self.nodes * span / self.law.mean_s)
        return until + self.law.sessions(rng, k) if k else np.empty(0)

    def describe(self) -> str:
        """The churn in words, for summaries."""
        shape = "" if self.law.kind == "exponential" else f" and shape {self.law.shape:g}"
        return (f"{self.law.kind} sessions with mean {self.law.mean_s:.0f} s{shape}, Poisson arrivals at "
                f"{self.nodes / self.law.mean_s:.3f}/s")


@dataclass(frozen=True)
class TraceChurn:
    """Churn replayed from a trace: each session (row) is one node id, online from start_s to end_s."""

    trace: pd.DataFrame
    path: str

    @property
    def online(self) -> np.ndarray:
        """The rows under way at time 0."""
        return ((self.trace.start_s <= 0) & (self.trace.end_s > 0)).to_numpy()

    @property
    def nodes(self) -> int:
        """Nodes online at time 0."""
        return int(self.online.sum())

    @property
    def universe(self) -> int:
        """Node ids the run may use: one per session online at 0 or starting later."""
        return int((self.online | (self.trace.start_s > 0).to_numpy()).sum())

    def start(self, rng: np.random.Generator) -> np.ndarray:
        """The session ends (s) of the nodes online at time 0 (ids 0..nodes-1)."""
        return self.trace.end_s.to_numpy()[self.online]

    def arriving(self, until: float, span: float, rng: np.random.Generator) -> np.ndarray:
        """The session ends (s) of the sessions starting in the `span` s before `until`, which join then."""
        s = self.trace.start_s.to_numpy()
        return self.trace.end_s.to_numpy()[(s > until - span) & (s <= until)]

    def describe(self) -> str:
        """The churn in words, for summaries."""
        return f"sessions replayed from {Path(self.path).name} ({len(self.trace):,} sessions)"
