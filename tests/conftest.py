import logging
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")   # pyspark.testing imports pandas-on-Spark

from tests.helpers import ROOT  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    """One small local Spark for the whole suite (2 cores, few shuffle partitions, no UI)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").appName("scribe-spark tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.driver.memory", "2g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def tiny(spark, tmp_path_factory):
    """Run a job on conf/tiny/<job>.toml in this process, once per session; return its output folder."""
    from scribe_spark import cli
    root = tmp_path_factory.mktemp("tiny")
    done: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in done:
            assert cli.main(name,
                            ["--conf", str(ROOT / "conf" / "tiny" / f"{name}.toml"), "--out", str(root)]) == 0
            done[name] = root / name
        return done[name]
    return get


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def progress():
    """The superstep engine's progress lines logged during the test, as a list of strings."""
    logger = logging.getLogger("scribe_spark.bsp")
    handler, level = _Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.lines
    logger.removeHandler(handler)
    logger.setLevel(level)
