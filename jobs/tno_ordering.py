"""spark-submit entry point: T3 (TNO correctness over Scribe)."""
from scribe_spark.cli import run_job

if __name__ == "__main__":
    run_job("tno_ordering")
