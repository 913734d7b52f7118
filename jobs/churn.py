"""spark-submit entry point: churn run (continuous joins and leaves while lookups and Scribe events go on)."""
import sys

from scribe_spark.cli import main

if __name__ == "__main__":
    sys.exit(main("churn"))
