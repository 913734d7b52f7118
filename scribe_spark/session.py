"""The SparkSession every job uses; the master comes from spark-submit, never from code."""
from __future__ import annotations

from pyspark.sql import SparkSession

# Settings every session of the library, its tests and its benchmarks is made with. Python workers
# talk to their executor over a Unix domain socket (Spark 4.1, SPARK-51688) rather than TCP: on this
# machine each Python task then adds about 12 ms to a job instead of about 31 (empty mapInArrow
# tasks; over TCP a task waits about 40 ms for its first batch), and a superstep runs one Python task
# per partition of the node state.
SESSION_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.python.unix.domain.socket.enabled": "true",
}


def spark_session(app: str) -> SparkSession:
    """Return the active SparkSession (created with the job's name if none is running)."""
    # adaptive execution stays on whatever spark-defaults say: the tables are the same without it
    # (tests run joins and repair that way), but it is how the jobs are measured
    spark = (SparkSession.builder.appName(f"scribe-spark {app}")
             .config(map=SESSION_CONF)
             .config("spark.sql.adaptive.enabled", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark
