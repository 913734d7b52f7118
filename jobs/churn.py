"""spark-submit entry point: Pastry in simulated time (crashes, keep-alives, leaf-set repair, lookups)."""
from scribe_spark.cli import run_job

if __name__ == "__main__":
    run_job("churn")
