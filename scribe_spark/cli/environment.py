"""The environment knobs (`SCRIBE_*`) and the Spark master, checked as the programs that use them read them.

`run.sh` hands the memory sizes to `spark-submit`, which passes the driver's to the JVM as `-Xmx`
and Spark's own parser reads them again; both must accept a value (`capacity.memory_bytes`). A
master is checked for what can be known before Spark starts: that it is a URL `spark-submit`
takes, that a standalone master or a Kubernetes API server answers on its port, and that YARN and
Kubernetes have their configuration.
"""
from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from scribe_spark.capacity import memory_bytes
from scribe_spark.cli.args import UsageError
from scribe_spark.knobs import ConfigError

LEAST_HEAP = 1 << 30   # Spark keeps 450 MiB of a JVM heap for itself; the jobs need the rest
MOST_HEAP = 64 << 40   # no machine this runs on has more
# the masters spark-submit takes: local[N] (N or *, and retries), a local test cluster, standalone, YARN, k8s
MASTER = re.compile(r"local(\[(\*|0*[1-9]\d*)(\s*,\s*\d+)?\])?|local-cluster\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]"
                    r"|spark://\S+|yarn|k8s://\S+")
CONNECT_TIMEOUT_S = 3.0


class MasterError(ValueError):
    """The Spark master cannot be reached, or its cluster manager lacks its configuration."""

    def __init__(self, message: str, unconfigured: bool = False):
        super().__init__(message)
        self.unconfigured = unconfigured


@dataclass(frozen=True)
class EnvKnob:
    """One environment variable: its default, what it holds, and who reads it.

    `kind` is "heap" (a JVM memory size of at least 1g), "integer" (in lo..hi) or "folder".
    `scope`: job (every run reads it), cluster-job (runs on a cluster master), cluster (`./run.sh
    cluster`).
    """

    name: str
    default: str
    kind: str
    doc: str
    scope: str = "job"
    lo: int = 0
    hi: int = 0

    def read(self, text: str) -> object:
        """The knob's value from its text, or ConfigError naming the variable and the reason."""
        if self.kind == "heap":
            size = memory_bytes(text, self.name)
            if not LEAST_HEAP <= size <= MOST_HEAP:
                raise ConfigError(f"{self.name}: {text!r} is not a JVM heap size here (at least 1g, at most "
                                  "64t; "
                                  "Spark keeps 450 MiB of a heap for itself)")
            return size
        if self.kind == "integer":
            if not re.fullmatch(r"[0-9]+", text) or not self.lo <= int(text) <= self.hi:
                raise ConfigError(f"{self.name}: {text!r} is not an integer in {self.lo}..{self.hi}")
            return int(text)
        return _folder(text, self.name)


def _folder(text: str, name: str) -> str:
    """A folder that exists or can be made: probed by making what is missing of it, then removing that."""
    if not text:
        raise ConfigError(f"{name}: empty; name a folder")
    made: list[Path] = []
    try:
        path = Path(text).absolute()
        for d in reversed([d for d in (path, *path.parents) if not d.exists()]):
            d.mkdir()
            made.append(d)
        if not os.access(text, os.W_OK):
            raise PermissionError(13, "Permission denied", text)
    except OSError as e:
        raise ConfigError(f"{name}: {text!r} cannot be made or written ({e.strerror})") from None
    finally:
        for d in reversed(made):
            d.rmdir()
    return text


KNOBS = {k.name: k for k in (
    EnvKnob("SCRIBE_DRIVER_MEMORY", "8g", "heap", "the Spark driver's JVM heap (local runs: all of Spark's)"),
    EnvKnob("SCRIBE_EXECUTOR_MEMORY", "3g", "heap", "each executor's JVM heap on a cluster master",
            "cluster-job"),
    EnvKnob("SCRIBE_SHUFFLE_PARTITIONS", "8", "integer", "spark.sql.shuffle.partitions: the partitions of a "
            "shuffle (more cost more in task start-up than they gain)", lo=1, hi=10_000),
    EnvKnob("SCRIBE_CLUSTER_DIR", "data/cluster", "folder", "the local cluster's logs, pid files and work "
            "folders", "cluster"),
    EnvKnob("SCRIBE_CLUSTER_PORT", "7077", "integer", "the local cluster master's port", "cluster", 1, 65535),
    EnvKnob("SCRIBE_CLUSTER_WEBUI", "8080", "integer", "the local cluster master's web UI port (0: any free "
            "port)", "cluster", 0, 65535),
    EnvKnob("SCRIBE_WORKER_MEMORY", "4g", "heap", "memory each local cluster worker offers", "cluster"),
    EnvKnob("SCRIBE_WORKER_CORES", "1", "integer", "cores each local cluster worker offers", "cluster", 1,
            1024),
)}
# set by run.sh for the programs it starts, never by a user
INTERNAL = ("SCRIBE_MASTER", "SCRIBE_RUN_DIR", "SCRIBE_RESUME_WITH")


def value(name: str) -> str:
    """The value a knob has here: the environment's, else its default."""
    return os.environ.get(name, KNOBS[name].default)


def check_environment(scope: str, master: str = "local[*]") -> list[str]:
    """Check every SCRIBE_* variable set here; raise ConfigError, or return warnings (one line each)."""
    warnings = []
    for name in sorted(os.environ):
        if not name.startswith("SCRIBE_") or name in INTERNAL:
            continue
        if name not in KNOBS:
            raise ConfigError(f"{name}: not a knob of scribe-spark (known: {', '.join(KNOBS)})")
        knob = KNOBS[name]
        knob.read(os.environ[name])
        if knob.scope == "cluster-job" and scope == "job" and master.startswith("local"):
            warnings.append(f"{name} is used only with a cluster master; --master {master} ignores it")
    if scope == "job":
        for name, knob in KNOBS.items():
            if knob.scope == "job":
                knob.read(value(name))
    return warnings


def check_master(master: str) -> None:
    """Raise UsageError unless `master` is a Spark master URL that spark-submit takes."""
    if not MASTER.fullmatch(master):
        raise UsageError(f"--master {master!r}: not a Spark master URL "
                          "(local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL)")


def reach_master(master: str) -> None:
    """Raise MasterError when a cluster master cannot answer or its cluster manager is not configured."""
    if master.startswith("spark://"):
        hosts = [h for h in master.removeprefix("spark://").split(",") if h]
        if not any(_answers(*_host_port(h, 7077)) for h in hosts):
            raise MasterError(f"--master {master}: no Spark master answers at {', '.join(hosts)} (start one "
                              "with "
                              "./run.sh cluster start, or check the URL)")
    elif master == "yarn":
        if not any(os.path.isdir(os.environ.get(v, "")) for v in ("HADOOP_CONF_DIR", "YARN_CONF_DIR")):
            raise MasterError("--master yarn: set HADOOP_CONF_DIR or YARN_CONF_DIR to the folder of the "
                              "cluster's "
                              "configuration", unconfigured=True)
    elif master.startswith("k8s://"):
        url = urlparse(master.removeprefix("k8s://"))
        host, port = url.hostname or "", url.port or (80 if url.scheme == "http" else 443)
        if not _answers(host, port):
            raise MasterError(f"--master {master}: no Kubernetes API server answers at {host}:{port}")
        if "spark.kubernetes.container.image" not in _spark_defaults():
            raise MasterError(f"--master {master}: set spark.kubernetes.container.image in "
                              "spark-defaults.conf (SPARK_CONF_DIR) to an image with Python and this library",
                              unconfigured=True)


def _host_port(text: str, default: int) -> tuple[str, int]:
    host, _, port = text.rpartition(":") if ":" in text else (text, "", str(default))
    return host.strip("[]"), int(port) if port.isdigit() else default


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


def _spark_defaults() -> str:
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        return ""
    try:
        return (Path(conf_dir) / "spark-defaults.conf").read_text()
    except OSError:
        return ""
