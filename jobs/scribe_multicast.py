"""spark-submit entry point: SPEC S1 (Scribe at scale vs IP multicast)."""
import sys

from scribe_spark.cli import main
from scribe_spark.config import ScribeParams
from scribe_spark.scribe.multicast import run

if __name__ == "__main__":
    sys.exit(main("scribe_multicast", ScribeParams, run))
