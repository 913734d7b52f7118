"""spark-submit entry point: SPEC T1 (TNO timestamp size)."""
import sys

from scribe_spark.cli import main

if __name__ == "__main__":
    sys.exit(main("tno_timestamp_size"))
