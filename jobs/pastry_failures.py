"""spark-submit entry point: SPEC P3 (Pastry routing under node failures, and repair)."""
import sys

from scribe_spark.cli import main
from scribe_spark.config import PastryFailuresParams
from scribe_spark.pastry.failures_experiment import run

if __name__ == "__main__":
    sys.exit(main("pastry_failures", PastryFailuresParams, run))
