"""spark-submit entry point: SPEC S2 (Scribe with many small groups)."""
import sys

from scribe_spark.cli import main

if __name__ == "__main__":
    sys.exit(main("scribe_small_groups"))
