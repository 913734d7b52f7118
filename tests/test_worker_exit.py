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
