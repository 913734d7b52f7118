"""spark-submit entry point: routing-table quality after Pastry joins (the Pastry paper)."""
import sys

from scribe_spark.cli import main

if __name__ == "__main__":
    sys.exit(main("pastry_joins"))
