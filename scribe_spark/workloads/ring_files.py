"""A ring of more than one block, drawn and sorted in Spark, kept in memory-mapped files.

Spark tasks draw the ring block by block (`network.ring_block`) and sort it by id. The driver reads
both, one partition at a time, into `.npy` files beside Spark's scratch files and maps them: its
memory holds a partition, not the ring. `spark/shared.py` shares the same files (a link, not a copy):
on a local master the workers map them too, and the operating system's page cache holds one copy
for the driver and the workers; on a cluster each executor gets its copy.
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from numpy.lib.format import open_memmap
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from scribe_spark import ids
from scribe_spark.pastry.kernels import Ring
from scribe_spark.spark.arrow import partition_batches
from scribe_spark.spark.shared import new_folder, tie
from scribe_spark.workloads import network

_log = logging.getLogger(__name__)

SIGN = np.uint64(1 << 63)   # flips an unsigned 64-bit id half into a signed long of the same order
COORDS = {"plane": 2, "sphere": 3}


def _schema(model: str) -> T.StructType:
    """The drawn ring's rows: node number, sortable id halves and the location."""
    fields = [T.StructField(c, T.LongType(), False) for c in ("node", "khi", "klo")]
    if model in COORDS:
        fields += [T.StructField(f"c{i}", T.DoubleType(), False) for i in range(COORDS[model])]
    else:
        fields.append(T.StructField("site", T.IntegerType(), False))
    return T.StructType(fields)


def _draw_task(n: int, seed: int, model: str, sites: int, size: int):
    """The task that draws the blocks whose numbers it is given."""
    def task(batches):
        for batch in batches:
            for block in batch.column(0).to_numpy():
                hi, lo, where = network.ring_block(n, int(block), seed, model, sites, size)
                start = int(block) * size
                cols = {"node": np.arange(start, start + len(hi), dtype=np.int64),
                        "khi": (hi ^ SIGN).view(np.int64), "klo": (lo ^ SIGN).view(np.int64)}
                if where.ndim == 2:
                    cols.update({f"c{i}": where[:, i] for i in range(where.shape[1])})
                else:
                    cols["site"] = where
                yield pa.RecordBatch.from_pydict(cols)
    return task


def _file(path: Path, dtype, shape: tuple[int, ...]) -> np.memmap:
    """A new `.npy` file mapped for writing, its blocks allocated now: a full disk raises OSError here,
    where writing to the pages of a sparse file would kill the process (SIGBUS)."""
    try:
        out = open_memmap(path, "w+", dtype, shape)
        with open(path, "r+b") as fd:
            os.posix_fallocate(fd.fileno(), 0, os.path.getsize(path))
    except OSError as e:          # name the file: an allocation's error names none
        raise OSError(e.errno, e.strerror, str(path)) from e
    return out


def _unsigned(col: pa.Array) -> np.ndarray:
    """A sortable id half back as the unsigned half it came from."""
    return col.to_numpy().view(np.uint64) ^ SIGN


def _by_node(frame, folder: Path, n: int, model: str) -> dict[str, np.ndarray]:
    """Write the ids and locations by node number to files; return them mapped."""
    where_shape = (n, COORDS[model]) if model in COORDS else (n,)
    out = {"hi": _file(folder / "hi.npy", np.uint64, (n,)),
           "lo": _file(folder / "lo.npy", np.uint64, (n,)),
           "where": _file(folder / "where.npy", np.float64 if model in COORDS else np.int32, where_shape)}
    at = 0
    for batch in partition_batches(frame):   # partitions are blocks, in node order
        k = batch.num_rows
        if batch.column(0)[0].as_py() != at:
            raise RuntimeError(f"ring blocks arrived out of order at node {at}")
        out["hi"][at:at + k] = _unsigned(batch.column(1))
        out["lo"][at:at + k] = _unsigned(batch.column(2))
        if model in COORDS:
            out["where"][at:at + k] = np.column_stack([batch.column(3 + i).to_numpy()
                                                       for i in range(COORDS[model])])
        else:
            out["where"][at:at + k] = batch.column(3).to_numpy()
        at += k
    if at != n:
        raise RuntimeError(f"the ring's blocks hold {at} nodes, not {n}")
    return {name: _reopen(a) for name, a in out.items()}


def _sorted(frame, folder: Path, n: int) -> dict[str, np.ndarray]:
    """Write the ring order (node numbers by id), its inverse and the ids in that order to files."""
    out = {"order": _file(folder / "order.npy", np.int64, (n,)),
           "pos": _file(folder / "pos.npy", np.int64, (n,)),
           "shi": _file(folder / "shi.npy", np.uint64, (n,)),
           "slo": _file(folder / "slo.npy", np.uint64, (n,))}
    at, last = 0, (np.empty(0, np.int64), np.empty(0, np.int64))
    for batch in partition_batches(frame.select("node", "khi", "klo").orderBy("khi", "klo")):
        k = batch.num_rows
        node, khi, klo = (batch.column(i).to_numpy() for i in range(3))
        ids.require_distinct(np.concatenate([last[0], khi]), np.concatenate([last[1], klo]))   # and across
        last = (khi[-1:], klo[-1:])
        out["order"][at:at + k] = node
        out["pos"][node] = np.arange(at, at + k)
        out["shi"][at:at + k] = khi.view(np.uint64) ^ SIGN
        out["slo"][at:at + k] = klo.view(np.uint64) ^ SIGN
        at += k
    if at != n:
        raise RuntimeError(f"the sorted ring has {at} nodes, not {n}")
    return {name: _reopen(a) for name, a in out.items()}


def _reopen(a: np.memmap) -> np.ndarray:
    """Flush a written file and map it read-only, as the workers do."""
    a.flush()
    path = a.filename
    del a
    return np.load(path, mmap_mode="r")


def spark_ring(spark: SparkSession, n: int, p, seed: int, routers, matrix, size: int) -> Ring:
    """Draw an n-node ring in Spark, in blocks of `size` nodes, and sort it there; return it mapped
    from files."""
    model = p.proximity
    sites = network.site_count(p, routers, matrix)
    blocks = network.ring_blocks(n, size)
    frame = spark.range(blocks, numPartitions=blocks).mapInArrow(_draw_task(n, seed, model, sites, size),
                                                                 _schema(model))
    folder = new_folder("ring")
    t0 = time.time()
    by_node = _by_node(frame, folder, n, model)
    _log.info(f"ring: {n:,} nodes drawn in {blocks} blocks by Spark tasks ({time.time() - t0:.1f}s)")
    t0 = time.time()
    ranked = _sorted(frame, folder, n)
    _log.info(f"ring: sorted by Spark tasks and written to {folder} ({time.time() - t0:.1f}s)")
    prox = network.proximity(model, by_node["where"], routers, matrix)
    if prox.site is not None:   # grouped here, so that the ring does not group them in memory
        prox.by_site(out=_file(folder / "members.npy", np.int32, (n,)))
    ring = Ring.presorted(by_node["hi"], by_node["lo"], p.b, p.leaf_set, p.neighborhood, prox, **ranked)
    tie(ring.token, folder)   # its files go when its share is forgotten
    return ring
