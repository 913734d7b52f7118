"""Machine-size check made before Spark starts: refuse a run whose state cannot fit in this machine.

The estimates are lower bounds of what a run must hold at once (ids, node state, router
delays, topics and subscriptions, simulated events, publication draws), so a refused run
could never have finished here; a run that passes may still need more (Spark's own overhead
comes on top). Three budgets are checked:
the run's arrays against the machine's memory; the ring, which the local Python workers map from
shared files (`spark/shared.py`) and the Python driver holds too when it drew the ring itself (a ring of
one block, `workloads/network.py`), against what the JVM heap (`SCRIBE_DRIVER_MEMORY`) leaves of the
machine; and an overlay's node state, which Spark holds in the JVM heap and spills to its local folder,
against the heap and that folder's free disk, with the files of a ring drawn in Spark. Beside
them, `peak_warning` compares an estimate of an overlay run's peak, from each kind of process's peak
as measured for S1 (below), with the machine: a warning, not a refusal, as that figure is an estimate,
not a bound.
"""
from __future__ import annotations

import os
import re
from typing import Any

from scribe_spark.knobs import ConfigError
from scribe_spark.sizes import free_bytes, human_bytes, knob_names, machine_bytes, require, scratch_dir
from scribe_spark.topology import SITE_ORDER_MAX_SITES
from scribe_spark.workloads.network import RING_BLOCK

MEMORY = re.compile(r"[1-9][0-9]*[kKmMgGtT]")
UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def memory_bytes(text: str, name: str) -> int:
    """Return the bytes of a memory size as the JVM (-Xmx) and Spark both read it: '8g', '512m', '2T'.

    Digits and one unit letter in either case: the JVM refuses '3gb' and '1.5g', and reads digits
    alone as bytes where Spark reads them as MiB, so neither is taken.
    """
    if not MEMORY.fullmatch(text):
        raise ConfigError(f"{name}: {text!r} is not a memory size (digits and one of k, m, g or t, e.g. 8g)")
    return int(text[:-1]) * UNITS[text[-1].lower()]


def local_workers(master: str) -> int:
    """Return the Python workers a master runs here: N for local[N], cores for local[*], 0 for a cluster."""
    m = master.strip()
    if m == "local":
        return 1
    if m.startswith("local[") and m.endswith("]"):
        inside = m[len("local["):-1].split(",")[0]
        if inside == "*":
            return os.cpu_count() or 1
        return int(inside) if inside.isdigit() else 1
    return 0


# in-memory bytes per node of the ring: hi, lo, order, pos, shi, slo (8 bytes each) and the location
# (site models: the site and the nodes grouped by site, 4 bytes each)
RING_BYTES_PER_NODE = {"plane": 48 + 16, "sphere": 48 + 24, "transit-stub": 48 + 8, "matrix": 48 + 8}


def ring_in_driver(p: Any) -> bool:
    """Whether the Python driver draws the ring and holds it in its own memory (a ring of one block);
    a larger one is drawn and sorted in Spark, and the driver maps its files as the workers do."""
    return p.peak_nodes() <= RING_BLOCK


def ring_copies(p: Any, master: str) -> int:
    """The ring's copies in this machine's memory: the driver's own copy of a ring it drew, and the files
    the local workers (and the driver, for a ring drawn in Spark) map, one copy in the page cache for all."""
    return 1 + (ring_in_driver(p) and local_workers(master) > 0)


def ring_bytes(p: Any) -> int:
    """Lower bound of one in-memory copy of the ring (ids, ring order, locations, site delays)."""
    size = p.peak_nodes() * RING_BYTES_PER_NODE.get(p.proximity, 48)
    if p.proximity == "transit-stub":
        routers = p.topology.routers
        size += routers ** 2 * (4 + 2 * (routers <= SITE_ORDER_MAX_SITES))   # delays, and the site order
    return size


# each kind of process at its own peak in S1 (transit-stub, local[2], an 8 GiB heap; the performance page
# has the runs). The driver JVM's resident memory beyond its heap. The Python driver's resident peak,
# which N no longer moves: it comes at the start, with the router network's all-pairs delays, and after
# that the driver holds no array per node (a ring drawn in Spark is files it maps, counted below; a
# ring of one block it draws and holds itself). Each local Python worker's own memory (anonymous pages)
# at 2,000,000 and 4,000,000 nodes: a fixed part and its growth per node (the prefix classes its tasks
# search, which grow with the ring until they hold every site). The files the local workers map once
# for all of them (`spark/shared.py`): the ring, and beside it the site order, the router delays and
# the libraries (WORKERS_SHARED_BYTES). The peaks need not coincide, so their sum overestimates a run's
# peak.
JVM_BEYOND_HEAP = 9 * (1 << 30) // 10   # 0.9 GiB: 8.8-8.9 GiB resident with an 8 GiB heap
DRIVER_PEAK_BYTES = 700 << 20   # 532, 595 and 700 MiB resident at 250k, 2M and 4M nodes
WORKER_FIXED_BYTES = 190 << 20   # 224 and 258 MiB at 2M and 4M nodes
WORKER_BYTES_PER_NODE = 18
WORKERS_SHARED_BYTES = 140 << 20   # resident, not the worker's own, not the ring: 140 MiB at 4M


def expected_peak(p: Any, heap_bytes: int, master: str) -> int:
    """Estimate an overlay run's peak resident memory here: each kind of process at its measured peak,
    the files the local workers and the driver map (the ring among them) once for all of them, and the
    driver's own copy of a ring it drew."""
    workers, n = local_workers(master), p.peak_nodes()
    ring = RING_BYTES_PER_NODE.get(p.proximity, 48) * n
    python = DRIVER_PEAK_BYTES + workers * (WORKER_FIXED_BYTES + WORKER_BYTES_PER_NODE * n)
    shared = WORKERS_SHARED_BYTES if workers else 0
    return heap_bytes + JVM_BEYOND_HEAP + python + ring * ring_copies(p, master) + shared


def peak_warning(p: Any, heap: str, master: str, limit: int | None = None) -> str | None:
    """Return a line when an overlay run's estimated peak exceeds this machine's memory, else None.

    Defaults as in `check`. The figures per node come from S1's workload, so for lighter jobs the
    estimate is high; a run above it may still finish, and one below it is not promised to.
    """
    if not has_overlay(p):
        return None
    limit = machine_bytes() if limit is None else limit
    peak = expected_peak(p, memory_bytes(heap, "SCRIBE_DRIVER_MEMORY"), master)
    if peak <= limit:
        return None
    workers = local_workers(master)
    return (f"key 'nodes': an overlay of up to {p.peak_nodes():,} nodes may need up to about "
            f"{human_bytes(peak)} (the JVM heap SCRIBE_DRIVER_MEMORY={heap}; the Python driver's "
            f"{human_bytes(DRIVER_PEAK_BYTES)}; per node, {WORKER_BYTES_PER_NODE} bytes in each of "
            f"{workers} local Python workers beside its fixed {human_bytes(WORKER_FIXED_BYTES)}, and the "
            "ring the workers map once; each process at its peak as measured for S1), more than this "
            f"machine's {human_bytes(limit)}: the run may be stopped for lack of memory; lower 'nodes', "
            "SCRIBE_DRIVER_MEMORY or the local workers (--master local[N])")


def has_overlay(p: Any) -> bool:
    """Whether a run builds a Pastry overlay (its parameters say how many nodes at most)."""
    return hasattr(p, "peak_nodes")


def check(p: Any, heap: str, master: str, limit: int | None = None, disk: int | None = None) -> None:
    """Raise ConfigError naming the key when a run cannot fit in `limit` bytes (default: this machine).

    `heap` is the JVM heap (SCRIBE_DRIVER_MEMORY) and `master` the Spark master; together they say
    how much memory the Python processes have left and how many ring copies they hold. An overlay's
    node state is Spark's to hold: in the heap, the rest spilled to local disk, so on a local master it
    must fit in the heap and the `disk` bytes free in Spark's local folder (default: measured).
    """
    limit = machine_bytes() if limit is None else limit
    heap_bytes = memory_bytes(heap, "SCRIBE_DRIVER_MEMORY")
    if heap_bytes >= limit:
        raise ConfigError(f"SCRIBE_DRIVER_MEMORY: a JVM heap of {human_bytes(heap_bytes)} leaves nothing of "
                          f"this machine's {human_bytes(limit)} of memory for the Python processes; "
                          "lower SCRIBE_DRIVER_MEMORY")
    parts = p.needs()
    for key, size, what in parts:
        require(key, size, what, limit)
    total = sum(size for _, size, _ in parts)
    if total > limit:
        knobs, size, what = max(parts, key=lambda part: part[1])
        named, lower = knob_names(knobs)
        raise ConfigError(f"{named}: this run needs at least {human_bytes(total)} in all, more than this "
                          f"machine's {human_bytes(limit)} of memory; its largest part is {what} "
                          f"({human_bytes(size)}): lower {lower}")
    if has_overlay(p):
        mine = ring_in_driver(p)
        ring = ring_bytes(p) * ring_copies(p, master)
        if ring > limit - heap_bytes:
            held = ("held by the Python driver and mapped by the local Python workers" if mine else
                    "drawn in Spark and mapped from files by the Python driver and the local Python workers")
            raise ConfigError(
                f"key 'nodes': the ring of {p.peak_nodes():,} nodes, {held}, needs at least "
                f"{human_bytes(ring)}, more than the {human_bytes(limit - heap_bytes)} this machine's "
                f"{human_bytes(limit)} leaves beside the "
                f"JVM heap of {human_bytes(heap_bytes)} (SCRIBE_DRIVER_MEMORY); lower 'nodes' or "
                "SCRIBE_DRIVER_MEMORY")
        if local_workers(master):   # on a cluster the state is the executors', on their machines
            check_state(p, heap_bytes, disk)


def check_state(p: Any, heap_bytes: int, disk: int | None = None) -> None:
    """Raise ConfigError when an overlay's node state cannot fit in the JVM heap and the free local disk."""
    key, size, what = p.state_need()
    if not ring_in_driver(p):    # the files of a ring drawn in Spark are written to the same folder
        size, what = size + ring_bytes(p), f"{what} with its ring's files"
    folder = scratch_dir()
    disk = free_bytes(folder) if disk is None else disk
    if size > heap_bytes + disk:
        named, lower = knob_names(key)
        raise ConfigError(f"{named}: {what} needs at least {human_bytes(size)}, more than the JVM heap of "
                          f"{human_bytes(heap_bytes)} (SCRIBE_DRIVER_MEMORY) and the {human_bytes(disk)} "
                          f"free in Spark's local folder {folder} hold together (Spark spills there what the "
                          f"heap does not hold); lower {lower}, or point SPARK_LOCAL_DIRS at a larger disk")
