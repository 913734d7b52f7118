"""spark-submit entry point: the quick tour, every experiment at its conf/quick/ size in one Spark session."""
import sys

from scribe_spark.cli import start

if __name__ == "__main__":
    start.run_tour(sys.argv[1], sys.argv[2])
