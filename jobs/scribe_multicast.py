"""spark-submit entry point: SPEC S1 (Scribe at scale vs IP multicast)."""
import sys

from scribe_spark.cli import main

if __name__ == "__main__":
    sys.exit(main("scribe_multicast"))
