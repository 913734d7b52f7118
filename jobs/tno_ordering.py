"""spark-submit entry point: SPEC T3 (TNO correctness over Scribe)."""
import sys

from scribe_spark.cli import main

if __name__ == "__main__":
    sys.exit(main("tno_ordering"))
