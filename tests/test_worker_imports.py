"""Spark's Python workers re-read a zip archive's directory only when the archive changed."""
import os
import sys
import zipfile
import zipimport

import pyarrow as pa
import pytest

from scribe_spark.spark import worker_imports


def _zip(path, modules: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in modules.items():
            z.writestr(f"{name}.py", text)


def test_an_unchanged_archive_is_not_read_again_and_a_changed_one_is(tmp_path, monkeypatch):
    archive = tmp_path / "lib.zip"
    _zip(archive, {"a": "X = 1\n"})
    importer = zipimport.zipimporter(str(archive))
    reads = []
    real = zipimport._read_directory
    monkeypatch.setattr(zipimport, "_read_directory", lambda p: reads.append(p) or real(p))
    invalidate = worker_imports._invalidate_when_changed(zipimport.zipimporter.invalidate_caches)
    invalidate(importer)
    invalidate(importer)
    invalidate(importer)
    assert reads == [str(archive)]   # the first call reads (no stamp yet), the others find it unchanged
    assert importer.find_spec("b") is None
    _zip(archive, {"a": "X = 1\n", "b": "Y = 2\n"})   # a new module: another size
    os.utime(archive, ns=(1, 1))
    invalidate(importer)
    assert len(reads) == 2 and importer.find_spec("b") is not None


def test_install_leaves_processes_other_than_spark_workers_alone():
    before = zipimport.zipimporter.invalidate_caches
    assert "pyspark.worker" not in sys.modules
    assert worker_imports.install() is False
    assert zipimport.zipimporter.invalidate_caches is before


@pytest.mark.skipif(not (3, 10) <= sys.version_info[:2] < (3, 12), reason="3.10-3.11 only")
def test_spark_workers_running_library_tasks_have_it_installed(spark):
    def _state(batches):
        import zipimport as z

        import scribe_spark  # noqa: F401  (what unpickling any library task imports first)
        lazy = bool(getattr(z.zipimporter.invalidate_caches, "scribe_spark", False))
        for b in batches:
            yield pa.RecordBatch.from_pydict({"lazy": [lazy] * b.num_rows})
    frame = spark.range(0, 40, 1, 2).mapInArrow(_state, "lazy boolean")
    assert {r.lazy for r in frame.collect()} == {True}
