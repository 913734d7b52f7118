"""Same seed, same tables: jobs on local[1] with other partitionings equal the suite's local[2] runs.

One `spark-submit` (local[1], 3 shuffle partitions, `partitions = 3` where a job has the key) runs
the jobs below on conf/tiny; the in-process runs of the `tiny` fixture (local[2], 2 shuffle
partitions) are the reference. bench/determinism.py extends this to every job and the
standalone cluster (figures in BENCHMARKS.md, "Determinism").
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scribe_spark.registry import JOBS
from tests.helpers import ROOT, tables

# the two that once differed between layouts, and one whose tables are all floating point
CHECKED = ["scribe_repair", "tno_ordering", "tno_sequencer"]


@pytest.mark.slow
def test_other_cores_and_partitions_give_identical_tables(tiny, tmp_path):
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[1]", "--driver-memory", "2g",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=3",
           str(ROOT / "bench" / "one_driver.py"), str(tmp_path)]
    for name in CHECKED:
        has_partitions = "partitions" in JOBS[name].params.__dataclass_fields__
        cmd += [name, *(["--set", "partitions=3"] if has_partitions else []), "--"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    # the other layout runs in its own driver while this process runs the reference (the suite's
    # tiny runs, reused by later tests): two mostly single-threaded drivers on two cores
    log = tmp_path / "driver.log"   # a file, not a pipe: nobody reads a pipe while the reference runs
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT)
        try:
            want = {name: tables(tiny(name)) for name in CHECKED}
            proc.wait(timeout=900)
        finally:
            proc.kill()
    assert proc.returncode == 0, log.read_text()[-6000:]
    for name in CHECKED:
        got, ref = tables(tmp_path / name), want[name]
        assert ref and got == ref, (name, [t for t in ref if got.get(t) != ref[t]])
