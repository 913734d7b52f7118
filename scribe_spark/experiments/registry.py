"""The experiments a user can run: one table for `run.sh list`, the jobs, the pre-start check, the docs
and the tests.

Each experiment module has `simulate(params, run) -> Outcome` (the protocols at work, returning the
declared tables) and `report(outcome, params, run)` (plots and the summary). Modules are named,
not imported, so that checking a job's parameters never imports Spark.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from scribe_spark import config
from scribe_spark.experiments.outputs import OUTPUTS, Table


@dataclass(frozen=True)
class Job:
    """One experiment: its parameters, the module that simulates and reports it, and what it reproduces."""

    name: str
    params: type
    module: str
    about: str

    @property
    def outputs(self) -> dict[str, Table]:
        """The tables the experiment writes, by name."""
        return OUTPUTS[self.name]

    def load(self) -> ModuleType:
        """Import and return the experiment's module (its `simulate` and `report`)."""
        return importlib.import_module(self.module)


def _job(name: str, params: type, about: str, module: str | None = None) -> Job:
    return Job(name, params, f"scribe_spark.experiments.{module or name}", about)


JOBS: dict[str, Job] = {j.name: j for j in (
    _job("pastry_hops", config.PastryHopsParams,
         "P1 + P2: Pastry hops and relative route distance vs overlay size"),
    _job("pastry_failures", config.PastryFailuresParams,
         "P3: Pastry routing under node failures, and repair"),
    _job("pastry_joins", config.PastryJoinsParams,
         "Pastry paper: routing-table quality after joins, with each second join phase"),
    _job("scribe_multicast", config.ScribeParams, "S1: Scribe trees at scale vs IP multicast"),
    _job("scribe_small_groups", config.ScribeParams, "S2: Scribe with many small groups",
         "scribe_multicast"),
    _job("scribe_repair", config.ScribeRepairParams,
         "S3: Scribe tree repair during an event stream, reliable ordered extension"),
    _job("churn", config.ChurnParams,
         "Pastry and Scribe in simulated time under churn: detection, repair, lookups and events per bin"),
    _job("tno_timestamp_size", config.TnoSizeParams, "T1: TNO timestamp size vs subscriptions"),
    _job("tno_sequencer", config.TnoSequencerParams,
         "T2: TNO sequencer latency, throughput and inter-server bandwidth"),
    _job("tno_ordering", config.TnoOrderingParams, "T3: TNO correctness over Scribe trees"),
)}


if __name__ == "__main__":
    width = max(map(len, JOBS))
    for job in JOBS.values():
        print(f"{job.name:<{width}}  {job.about}")
