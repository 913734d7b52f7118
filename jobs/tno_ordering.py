"""spark-submit entry point: SPEC T3 (TNO correctness over Scribe)."""
import sys

from scribe_spark.cli import main
from scribe_spark.config import TnoOrderingParams
from scribe_spark.tno.ordering_experiment import run

if __name__ == "__main__":
    sys.exit(main("tno_ordering", TnoOrderingParams, run))
