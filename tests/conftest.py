import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


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


def run_quick(name: str, params_cls, experiment, out: Path, *sets: str) -> Path:
    """Run job `name` in this process on conf/quick/<name>.toml plus `key=value` overrides; return its folder."""
    from scribe_spark import cli
    args = ["--conf", str(ROOT / "conf" / "quick" / f"{name}.toml"), "--out", str(out)]
    for s in sets:
        args += ["--set", s]
    assert cli.main(name, params_cls, experiment, args) == 0
    return out / name
