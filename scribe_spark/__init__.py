"""scribe-spark: a Spark-native, bulk-synchronous simulator of Pastry, Scribe and TNO."""
from scribe_spark.spark import worker_exit, worker_imports

__version__ = "0.1.0"

worker_imports.install()   # only acts inside Spark's Python workers on Python 3.10-3.11
worker_exit.install()      # only acts inside a worker forked by PySpark's daemon
