"""spark-submit entry point: S1 (Scribe at scale vs IP multicast)."""
from scribe_spark.cli import run_job

if __name__ == "__main__":
    run_job("scribe_multicast")
