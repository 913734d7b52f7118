"""spark-submit entry point: SPEC S2 (Scribe with many small groups)."""
import sys

from scribe_spark.cli import main
from scribe_spark.config import ScribeParams
from scribe_spark.scribe.multicast import run

if __name__ == "__main__":
    sys.exit(main("scribe_small_groups", ScribeParams, run))
