"""spark-submit entry point: churn run (continuous joins and leaves while lookups and Scribe events go on)."""
from scribe_spark.cli import run_job

if __name__ == "__main__":
    run_job("churn")
