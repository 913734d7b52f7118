import fcntl
import logging
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")   # pyspark.testing imports pandas-on-Spark
# every JVM the suite starts (its own Spark, the jobs and clusters its tests launch) compiles with the
# quick compiler only: small runs are mostly start-up and planning, which the optimizing compiler
# slows down (test_cluster and a kill -9 resume test: about 38% less CPU); results do not depend on it
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")

from tests.helpers import ROOT, start_other_layout  # noqa: E402

_XDIST = "PYTEST_XDIST_WORKER" in os.environ   # this process is one of pytest-xdist's workers
# the files that take longest (measured one after another), run first so the two test processes
# finish together; the others keep their order after them
LONGEST_FIRST = ["test_reproduce.py", "test_stops.py", "test_scribe_repair.py", "test_timed_recovery.py",
                 "test_timed_spark_joins.py", "test_determinism.py", "test_cluster.py", "test_timed_spark.py",
                 "test_jobs.py", "test_failures.py", "test_joins.py", "test_bsp.py"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the longest test files first (setup.cfg keeps pytest-xdist to this order)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session")
def spark():
    """One small local Spark for the whole suite (2 cores, 1 shuffle partition, a default parallelism of 1,
    no UI).

    One, not two: two test processes share the machine's two cores, and a small stage's extra tasks are
    mostly overhead (the joins test took 115 s against 148 s with two).

    Tuned for many small queries: no whole-stage code generation and (as every JVM of the suite) the
    JVM's quick compiler only (15-20% less CPU on tiny runs, the same tables). test_determinism's
    other driver runs with Spark's defaults and 3 partitions, so those still meet the suite's tables.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from scribe_spark.spark.session import SESSION_CONF
    session = (SparkSession.builder.master("local[2]").appName("scribe-spark tests").config(map=SESSION_CONF)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "1")
               .config("spark.default.parallelism", "1")
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
    itself only waits for what is left of it. Yields (process, output folder) or None. Under
    pytest-xdist every worker lists every test and the cores are busy anyway: the test starts it.
    """
    if _XDIST or not any(item.path.name == "test_determinism.py" for item in request.session.items):
        yield None
        return
    out = tmp_path_factory.mktemp("other_layout")
    proc = start_other_layout(out)
    yield proc, out
    proc.kill()
    proc.wait()


class _Tiny:
    """Runs of conf/tiny/<job>.toml, each made once per suite by whichever test process asks first."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, name: str) -> Path:
        """Return the output folder of the job's tiny run, waiting for another process making it."""
        return self.many([name])[name]

    def many(self, names: list[str]) -> dict[str, Path]:
        """Return {job: output folder}; runs another process is making are taken last, so this
        process makes the free ones meanwhile instead of waiting."""
        left = list(dict.fromkeys(names))
        while left:
            name = next((n for n in left if self._get(n, wait=False)), None)
            if name is None:   # every one left is being made by another process: wait for the first
                name = left[0]
                self._get(name, wait=True)
            left.remove(name)
        return {name: self.root / name for name in names}

    def _get(self, name: str, wait: bool) -> bool:
        from scribe_spark import cli
        with open(self.root / f".{name}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                return False
            if not (self.root / name).is_dir():   # a run's folder appears only when it is complete
                assert cli.main(name, ["--conf", str(ROOT / "conf" / "tiny" / f"{name}.toml"),
                                       "--out", str(self.root)]) == 0
            return True   # the lock is released when the file closes


@pytest.fixture(scope="session")
def tiny(spark, tmp_path_factory):
    """`tiny(job)`: the output folder of the job's run on conf/tiny/<job>.toml, made once per suite
    (under pytest-xdist in a folder the workers share); `tiny.many(jobs)` for several."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if _XDIST else base) / "tiny"
    root.mkdir(exist_ok=True)
    return _Tiny(root)


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
