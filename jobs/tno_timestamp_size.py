"""spark-submit entry point: T1 (TNO timestamp size)."""
from scribe_spark.cli import run_job

if __name__ == "__main__":
    run_job("tno_timestamp_size")
