"""spark-submit entry point: S3 (Scribe tree repair during an event stream, reliable extension)."""
from scribe_spark.cli import run_job

if __name__ == "__main__":
    run_job("scribe_repair")
