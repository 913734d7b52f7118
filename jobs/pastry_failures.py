"""spark-submit entry point: SPEC P3 (Pastry routing under node failures, and repair)."""
import sys

from scribe_spark.cli import main

if __name__ == "__main__":
    sys.exit(main("pastry_failures"))
