"""spark-submit entry point: SPEC T1 (TNO timestamp size)."""
import sys

from scribe_spark.cli import main
from scribe_spark.config import TnoSizeParams
from scribe_spark.tno.timestamp_size import run

if __name__ == "__main__":
    sys.exit(main("tno_timestamp_size", TnoSizeParams, run))
