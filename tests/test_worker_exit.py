"""A reused Spark Python worker whose socket the JVM closed leaves without writing to it."""
import io
import sys
import types

import pytest

from scribe_spark import worker_exit


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


def test_the_library_makes_frames_from_driver_data_through_arrow_never_from_python_lists():
    """A frame made from a Python list (or `parallelize`) is computed by plain Python tasks in a pool
    of workers that never import the library, so worker_exit never reaches them (PySpark's
    broken-pipe traceback at a session's stop, seen in scribe_repair)."""
    import ast
    from pathlib import Path

    root = Path(worker_exit.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name, args = node.func.attr, node.args
            listed = name == "createDataFrame" and args and isinstance(
                args[0], (ast.List, ast.ListComp, ast.Tuple, ast.GeneratorExp))
            if listed or name == "parallelize":
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []
