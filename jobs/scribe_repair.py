"""spark-submit entry point: SPEC S3 (Scribe tree repair during an event stream, reliable ordered extension)."""
import sys

from scribe_spark.cli import main
from scribe_spark.config import ScribeRepairParams
from scribe_spark.scribe.repair_experiment import run

if __name__ == "__main__":
    sys.exit(main("scribe_repair", ScribeRepairParams, run))
