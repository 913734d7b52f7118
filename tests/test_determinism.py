"""Same seed, same tables: jobs on local[1] with other partitionings equal the suite's runs.

One `spark-submit` (local[1], 3 shuffle partitions, `partitions = 3` where a job has the key,
Spark's defaults otherwise) runs the jobs of `helpers.OTHER_LAYOUT_JOBS` on conf/tiny; the
in-process runs of the `tiny` fixture (local[2], 1 shuffle partition, no whole-stage codegen) are
the reference. The other driver starts with the suite's first test (conftest's `other_layout`), or
with this test under pytest-xdist.
bench/determinism.py extends this to every job and the standalone cluster (figures in
docs/performance.md, "Determinism").
"""
import pytest

from tests.helpers import OTHER_LAYOUT_JOBS, start_other_layout, tables


@pytest.mark.slow
def test_other_cores_and_partitions_give_identical_tables(tiny, other_layout, tmp_path):
    proc, out = other_layout or (start_other_layout(tmp_path), tmp_path)
    try:
        want = {name: tables(folder) for name, folder in tiny.many(OTHER_LAYOUT_JOBS).items()}
        proc.wait(timeout=900)
    finally:
        proc.kill()
    assert proc.returncode == 0, (out / "driver.log").read_text()[-6000:]
    for name in OTHER_LAYOUT_JOBS:
        got, ref = tables(out / name), want[name]
        assert ref and got == ref, (name, [t for t in ref if got.get(t) != ref[t]])
