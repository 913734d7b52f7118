"""spark-submit entry point: SPEC T2 (TNO sequencer latency, throughput, bandwidth)."""
import sys

from scribe_spark.cli import main

if __name__ == "__main__":
    sys.exit(main("tno_sequencer"))
