"""scribe-spark: a Spark-native, bulk-synchronous simulator of Pastry, Scribe and TNO."""

__version__ = "0.1.0"
