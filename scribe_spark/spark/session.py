"""The SparkSession every job uses; the master comes from spark-submit, never from code."""
from __future__ import annotations

import signal
import threading

from pyspark.sql import SparkSession

# Settings every session of the library, its tests and its benchmarks is made with:
# - Python workers talk to their executor over a Unix domain socket rather than TCP, which takes
#   about two thirds off what each Python task adds to a job; a superstep runs one Python task per
#   partition of the node state (the performance page has the figures);
# - batches sent to Python tasks are cut by rows (spark.sql.execution.arrow.maxRecordsPerBatch,
#   10,000) only: with a byte limit, Spark measures the whole Arrow batch after every row it writes,
#   a tenth of a routing task's JVM time, and only rows of over 6.7 KB (a routing message with its
#   node's state is about 0.6 KB) would fill the default 64 MiB first;
# - a pandas frame that Arrow cannot convert raises instead of falling back, with a warning, to a
#   frame computed by plain Python tasks: those are slow at scale, and they run in workers that never
#   import the library (see `arrow.local_frame`).
SESSION_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
    "spark.python.unix.domain.socket.enabled": "true",
    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
}


def spark_session(app: str) -> SparkSession:
    """Return the active SparkSession (created with the job's name if none is running)."""
    # PySpark's SparkContext replaces the SIGINT handler with one that cancels every job through Py4J
    # from inside whatever Py4J call Ctrl-C interrupted, which breaks that connection; the handler in
    # place before (the job's own, which leaves the run resumable) is put back
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGINT) if main else None
    # adaptive execution stays on whatever spark-defaults say: the tables are the same without it
    # (tests run joins and repair that way), but it is how the jobs are measured
    spark = (SparkSession.builder.appName(f"scribe-spark {app}")
             .config(map=SESSION_CONF)
             .config("spark.sql.adaptive.enabled", "true")
             .getOrCreate())
    if before is not None:
        signal.signal(signal.SIGINT, before)
    spark.sparkContext.setLogLevel("ERROR")
    return spark
