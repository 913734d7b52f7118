"""spark-submit entry point: P1 + P2 (Pastry hops and relative route distance)."""
from scribe_spark.cli import run_job

if __name__ == "__main__":
    run_job("pastry_hops")
