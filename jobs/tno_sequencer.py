"""spark-submit entry point: T2 (TNO sequencer latency, throughput, bandwidth)."""
from scribe_spark.cli import run_job

if __name__ == "__main__":
    run_job("tno_sequencer")
