"""spark-submit entry point: SPEC P1 + P2 (Pastry hops and relative route distance)."""
import sys

from scribe_spark.cli import main

if __name__ == "__main__":
    sys.exit(main("pastry_hops"))
