"""spark-submit entry point: SPEC T2 (TNO sequencer latency, throughput, bandwidth)."""
import sys

from scribe_spark.cli import main
from scribe_spark.config import TnoSequencerParams
from scribe_spark.tno.sequencer_experiment import run

if __name__ == "__main__":
    sys.exit(main("tno_sequencer", TnoSequencerParams, run))
