"""The SparkSession every job uses; the master comes from spark-submit, never from code."""
from __future__ import annotations

from pyspark.sql import SparkSession


def spark_session(app: str) -> SparkSession:
    """Return the active SparkSession (created with the job's name if none is running)."""
    spark = (SparkSession.builder.appName(f"scribe-spark {app}")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark
