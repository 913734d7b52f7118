"""The experiments a user can run: one table for `run.sh list`, the jobs, the pre-start check and the tests.

Runners are named, not imported, so that checking a job's parameters never imports Spark.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from scribe_spark import config


@dataclass(frozen=True)
class Job:
    """One experiment: its parameters, the function that runs it, and what it reproduces."""

    name: str
    params: type
    runner: str          # "module:function", called as runner(params, run)
    about: str

    def load_runner(self) -> Callable[[Any, Any], None]:
        """Import and return the experiment function."""
        module, func = self.runner.split(":")
        return getattr(importlib.import_module(module), func)


JOBS: dict[str, Job] = {j.name: j for j in (
    Job("pastry_hops", config.PastryHopsParams, "scribe_spark.experiments.pastry_hops:run",
        "SPEC P1 + P2: Pastry hops and relative route distance vs overlay size"),
    Job("pastry_failures", config.PastryFailuresParams, "scribe_spark.experiments.pastry_failures:run",
        "SPEC P3: Pastry routing under node failures, and repair"),
    Job("pastry_joins", config.PastryJoinsParams, "scribe_spark.experiments.pastry_joins:run",
        "Pastry paper: routing-table quality after joins, with each second join phase"),
    Job("scribe_multicast", config.ScribeParams, "scribe_spark.experiments.scribe_multicast:run",
        "SPEC S1: Scribe trees at scale vs IP multicast"),
    Job("scribe_small_groups", config.ScribeParams, "scribe_spark.experiments.scribe_multicast:run",
        "SPEC S2: Scribe with many small groups"),
    Job("scribe_repair", config.ScribeRepairParams, "scribe_spark.experiments.scribe_repair:run",
        "SPEC S3: Scribe tree repair during an event stream, reliable ordered extension"),
    Job("churn", config.ChurnParams, "scribe_spark.experiments.churn:run",
        "churn run: continuous joins and leaves while lookups and Scribe events go on"),
    Job("tno_timestamp_size", config.TnoSizeParams, "scribe_spark.experiments.tno_timestamp_size:run",
        "SPEC T1: TNO timestamp size vs subscriptions"),
    Job("tno_sequencer", config.TnoSequencerParams, "scribe_spark.experiments.tno_sequencer:run",
        "SPEC T2: TNO sequencer latency, throughput and inter-server bandwidth"),
    Job("tno_ordering", config.TnoOrderingParams, "scribe_spark.experiments.tno_ordering:run",
        "SPEC T3: TNO correctness over Scribe trees"),
)}


if __name__ == "__main__":
    width = max(map(len, JOBS))
    for job in JOBS.values():
        print(f"{job.name:<{width}}  {job.about}")
