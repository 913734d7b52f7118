"""The SparkSession every job uses; the master comes from spark-submit, never from code."""
from __future__ import annotations

from pyspark.sql import SparkSession


def spark_session(app: str) -> SparkSession:
    """Return the active SparkSession (created with the job's name if none is running)."""
    # adaptive execution stays on whatever spark-defaults say: without it a later query can miss a
    # cached frame and recompute it from local checkpoints that are already released
    # (CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND in pastry_joins and scribe_repair on Spark 4.1)
    spark = (SparkSession.builder.appName(f"scribe-spark {app}")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .config("spark.sql.adaptive.enabled", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark
