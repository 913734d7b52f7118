"""spark-submit entry point: SPEC S3 (Scribe tree repair during an event stream, reliable extension)."""
import sys

from scribe_spark.cli import main

if __name__ == "__main__":
    sys.exit(main("scribe_repair"))
