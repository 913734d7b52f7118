"""A reused Spark Python worker whose socket the JVM closed leaves without writing to it."""
import ast
import io
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from scribe_spark.spark import worker_exit
from scribe_spark.spark.arrow import local_frame
from tests.helpers import plain_python_tasks


def test_a_closed_socket_before_a_task_exits_non_zero_and_writes_nothing():
    ran = []
    main = worker_exit._quiet_at_eof(lambda i, o: ran.append(i.read()))
    out = io.BytesIO()
    with pytest.raises(SystemExit) as stop:
        main(io.BufferedReader(io.BytesIO(b"")), out)
    assert stop.value.code == 1 and out.getvalue() == b"" and ran == []


def test_a_task_reads_every_byte_as_before():
    ran = []
    main = worker_exit._quiet_at_eof(lambda i, o: ran.append(i.read()))
    main(io.BufferedReader(io.BytesIO(b"\x00\x00\x00\x07task")), io.BytesIO())
    assert ran == [b"\x00\x00\x00\x07task"]


def test_install_patches_the_daemon_once_and_leaves_other_processes_alone(monkeypatch):
    assert worker_exit.install() is False   # pytest's __main__ is not the daemon
    daemon = types.ModuleType("__main__")
    daemon.__spec__ = types.SimpleNamespace(name="pyspark.daemon")
    original = daemon.worker_main = lambda i, o: None
    monkeypatch.setitem(sys.modules, "__main__", daemon)
    assert worker_exit.install() is True
    assert daemon.worker_main is not original and daemon.worker_main.scribe_spark
    assert worker_exit.install() is False


def test_the_library_makes_frames_of_driver_data_in_one_place_and_never_from_python_lists():
    """No `createDataFrame` outside arrow.local_frame, and no `parallelize`: a frame made from a Python
    list (or an empty pandas frame) is computed by plain Python tasks in a pool of workers that never
    import the library, so worker_exit never reaches them (PySpark's broken-pipe traceback at a
    session's stop, seen in scribe_repair)."""
    root = Path(worker_exit.__file__).parent.parent   # the whole library
    arrow = Path("spark/arrow.py")
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                    node.func.attr == "parallelize"
                    or (node.func.attr == "createDataFrame" and path.relative_to(root) != arrow)):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []


@pytest.mark.parametrize("data, schema, want", [
    (pd.DataFrame({"a": np.arange(3, dtype=np.int64)}), "a long", [(0,), (1,), (2,)]),
    (pd.DataFrame({"a": np.arange(0, dtype=np.int64)}), "a long", []),
    (pd.DataFrame({"a": np.arange(0, dtype=np.int32)}), "a long", []),
    (pd.DataFrame([], columns=["a", "b"]), "a long, b long", []),   # object columns, as from an empty list
    (pd.DataFrame({"a": np.arange(0, dtype=np.int64)}), None, []),
])
def test_a_local_frame_is_read_from_arrow_without_python_tasks_even_when_empty(spark, data, schema, want):
    frame = local_frame(spark, data, schema)
    assert not plain_python_tasks(frame)
    assert all(f.dataType == T.LongType() for f in frame.schema.fields)
    assert [tuple(r) for r in frame.orderBy("a").collect()] == want
    # what PySpark does with an empty pandas frame by itself: the plain Python tasks this avoids
    if len(data) == 0 and schema is not None:
        assert plain_python_tasks(spark.createDataFrame(data, schema))


def test_a_local_frame_takes_only_pandas_frames_and_arrow_tables(spark):
    table = pa.table({"a": pa.array([], pa.int64())})
    assert local_frame(spark, table, "a long").count() == 0
    with pytest.raises(TypeError, match="must be a pandas DataFrame or an Arrow table, not list"):
        local_frame(spark, [(1,)], "a long")
