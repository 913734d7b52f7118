"""spark-submit entry point: routing-table quality after Pastry joins (the Pastry paper)."""
from scribe_spark.cli import run_job

if __name__ == "__main__":
    run_job("pastry_joins")
