import logging
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")   # pyspark.testing imports pandas-on-Spark
# every JVM the suite starts (its own Spark, the jobs and clusters its tests launch) compiles with the
# quick compiler only: small runs are mostly start-up and planning, which the optimizing compiler
# slows down (test_cluster + test_resume: about 38% less CPU); results do not depend on it
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")

from tests.helpers import ROOT, start_other_layout  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    """One small local Spark for the whole suite (2 cores, few shuffle partitions, no UI).

    Tuned for many small queries: no whole-stage code generation and (as every JVM of the suite) the
    JVM's quick compiler only (15-20% less CPU on tiny runs, the same tables). test_determinism's
    other driver runs with Spark's defaults and 3 partitions, so those still meet the suite's tables.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").appName("scribe-spark tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.driver.memory", "2g")
               .config("spark.sql.codegen.wholeStage", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def other_layout(request, tmp_path_factory):
    """test_determinism's other driver, started with the suite's first test when that test is selected.

    It runs beside the tests before it (mostly single-threaded drivers on two cores), so the test
    itself only waits for what is left of it. Yields (process, output folder) or None.
    """
    if not any(item.path.name == "test_determinism.py" for item in request.session.items):
        yield None
        return
    out = tmp_path_factory.mktemp("other_layout")
    proc = start_other_layout(out)
    yield proc, out
    proc.kill()
    proc.wait()


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
