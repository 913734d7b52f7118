"""The SparkSession every job uses; the master comes from spark-submit, never from code."""
from __future__ import annotations

from pyspark.sql import SparkSession


def spark_session(app: str) -> SparkSession:
    """Return the active SparkSession (created with the job's name if none is running)."""
    # adaptive execution stays on whatever spark-defaults say: the tables are the same without it
    # (tests run joins and repair that way), but it is how the jobs are measured
    spark = (SparkSession.builder.appName(f"scribe-spark {app}")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .config("spark.sql.adaptive.enabled", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark
