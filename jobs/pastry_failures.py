"""spark-submit entry point: P3 (Pastry routing under node failures, and repair)."""
from scribe_spark.cli import run_job

if __name__ == "__main__":
    run_job("pastry_failures")
