"""Byte estimates of what a run holds, and the machine's memory: what parameter classes state as their needs.

Each estimate is a lower bound (ids, node state, router delays, topics and subscriptions, simulated
events), so a run refused for it could never have finished here; `capacity` weighs a run's needs
against the machine and the JVM heap before Spark starts.
"""
from __future__ import annotations

import importlib.util
import math
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from scribe_spark.knobs import ConfigError


def machine_bytes() -> int:
    """Return this machine's physical memory in bytes."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def id_bytes(nodes: int) -> int:
    """Lower bound of the bytes of `nodes` Pastry nodes' ids and ring order (the driver's ring)."""
    return nodes * 64


def state_bytes(nodes: int, b: int, leaf_set: int, neighborhood: int) -> int:
    """Lower bound of the bytes of `nodes` Pastry nodes' state entries (int32 node numbers)."""
    rows = max(1, math.ceil(math.log(max(nodes, 2), 2 ** b)))
    return nodes * 4 * (leaf_set + neighborhood + rows * (2 ** b - 1))


def scratch_dir() -> str:
    """Spark's local folder for spilled blocks and shuffles, found as Spark finds it: SPARK_LOCAL_DIRS'
    first, else the first of spark.local.dir in spark-defaults.conf, else the system's temporary folder."""
    return (os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0]
            or spark_default("spark.local.dir").split(",")[0] or tempfile.gettempdir())


def spark_default(key: str) -> str:
    """A setting of spark-defaults.conf (in SPARK_CONF_DIR, else SPARK_HOME's or PySpark's conf/), or ''."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        spec = importlib.util.find_spec("pyspark")
        home = (spec.submodule_search_locations or [""])[0] if spec else ""
    folder = os.environ.get("SPARK_CONF_DIR") or (str(Path(home) / "conf") if home else "")
    if not folder:
        return ""
    try:
        lines = (Path(folder) / "spark-defaults.conf").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return ""
    value = ""
    for line in lines:   # Java properties: "key value", "key=value" or "key: value"; the last one counts
        parts = re.split(r"\s*[=:\s]\s*", line.strip(), maxsplit=1)
        if parts[0] == key and len(parts) == 2:
            value = parts[1].strip()
    return value


def free_bytes(folder: str) -> int:
    """Free bytes on the disk that holds `folder`, or would hold it (its nearest existing parent, as Spark
    makes the folder it is given); 0 if none can be read."""
    path = Path(folder).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 0


def router_bytes(routers: int) -> int:
    """Lower bound of the bytes of the transit-stub all-pairs delays and next hops (computed in float64)."""
    return routers ** 2 * 20


# the Scribe sizes summed exactly over this many ranks at most; the ranks beyond count min_size each
EXACT_RANKS = 1_000_000


def subscriptions(p: Any) -> int:
    """Lower bound of a Scribe workload's subscriptions, without an array as long as `topics`."""
    if p.group_size:
        return p.topics * p.group_size
    ranks = min(p.topics, EXACT_RANKS)
    return int(p.sizes(ranks).sum()) + (p.topics - ranks) * p.min_size


def popularity_need(topics: int) -> tuple[str, int, str]:
    """A TNO run's part that grows with its topics: each law (8 bytes a topic) and its draws (24)."""
    return "topics", topics * 32, f"the popularity laws and draws of {count_text(topics)} topics"


def count_text(n: float) -> str:
    """Write a count with thousands separators, or in scientific notation past 10^15."""
    return f"{n:,.0f}" if n < 1e15 else f"{n:.3g}"


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024:
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB" if n < 1e6 else f"{n:.3g} PiB"


Knobs = str | tuple[str, ...]   # the key, or keys, whose values set a part's size


def knob_names(knobs: Knobs) -> tuple[str, str]:
    """Name a part's knobs: ("key 'a'", "'a'"), or ("keys 'a' and 'b'", "'a' or 'b'")."""
    names = [f"'{k}'" for k in ((knobs,) if isinstance(knobs, str) else knobs)]
    if len(names) == 1:
        return f"key {names[0]}", names[0]
    return f"keys {', '.join(names[:-1])} and {names[-1]}", f"{', '.join(names[:-1])} or {names[-1]}"


def require(key: Knobs, size: int, what: str, limit: int | None = None) -> None:
    """Raise ConfigError naming `key` when `what`, at least `size` bytes, exceeds `limit` (this machine)."""
    limit = machine_bytes() if limit is None else limit
    if size > limit:
        named, lower = knob_names(key)
        raise ConfigError(f"{named}: {what} need at least {human_bytes(size)}, more than this machine's "
                          f"{human_bytes(limit)} of memory; lower {lower}")
