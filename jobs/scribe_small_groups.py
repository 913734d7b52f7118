"""spark-submit entry point: S2 (Scribe with many small groups)."""
from scribe_spark.cli import run_job

if __name__ == "__main__":
    run_job("scribe_small_groups")
