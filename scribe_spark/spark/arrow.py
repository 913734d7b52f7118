"""Arrow helpers: frames of driver data, list columns, batches as dicts, a frame's rows streamed to the
driver or to a Parquet file (Spark schemas convert with PySpark's own `to_arrow_schema`)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T


def local_frame(spark: SparkSession, data: pd.DataFrame | pa.Table,
                schema: T.StructType | str | None = None) -> DataFrame:
    """Return a frame of driver data that the JVM reads from Arrow, however few its rows.

    The library makes every frame of driver data here. PySpark turns an empty pandas frame, or a
    Python list, into a frame computed by plain Python tasks, which run in a second pool of workers
    that never import the library, so `worker_exit` does not reach them. An empty pandas frame is
    therefore passed as an Arrow table, which the JVM reads without Python tasks (a pandas frame
    with rows goes through Arrow anyway, as `session.SESSION_CONF` turns Arrow on). An empty frame's
    columns must carry the schema's names, in order; without a schema, its types come from the
    pandas dtypes.
    """
    if not isinstance(data, (pd.DataFrame, pa.Table)):
        raise TypeError(f"local_frame: data must be a pandas DataFrame or an Arrow table, "
                        f"not {type(data).__name__}")
    if len(data) == 0 and isinstance(data, pd.DataFrame):
        data = pa.Table.from_pandas(data, preserve_index=False)
    return spark.createDataFrame(data, schema)


def list_array(lists: list[np.ndarray]) -> pa.ListArray:
    """Return a list<int32> Arrow array of node numbers from numpy arrays (node numbers are below 2^31)."""
    lens = np.fromiter((len(x) for x in lists), dtype=np.int32, count=len(lists))
    offsets = np.zeros(len(lists) + 1, dtype=np.int32)
    np.cumsum(lens, out=offsets[1:])
    values = np.concatenate(lists).astype(np.int32) if offsets[-1] else np.empty(0, dtype=np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))


def as_u64(a: pa.Array) -> np.ndarray:
    """Return an int64 Arrow column as uint64 numpy (the bits of a 64-bit id half)."""
    return a.to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)


def values_offsets(a: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
    """Return (values, offsets) of a list Arrow array as int64 numpy."""
    offs = a.offsets.to_numpy().astype(np.int64)
    return a.values.to_numpy(zero_copy_only=False).astype(np.int64), offs


def batch_columns(batches: Iterator[pa.RecordBatch]) -> Iterator[dict]:
    """Yield each non-empty Arrow batch as a {name: column} dict."""
    for batch in batches:
        if batch.num_rows:
            yield {name: batch.column(i) for i, name in enumerate(batch.schema.names)}


def partition_batches(frame: DataFrame) -> Iterator[pa.RecordBatch]:
    """Yield a frame's rows on the driver as Arrow batches (none empty), partition after partition in
    order, holding one partition at a time (rows travel packed, a batch per row, not one Python object
    each)."""
    def pack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_batch(batch)
            yield pa.RecordBatch.from_pydict({"ipc": pa.array([sink.getvalue().to_pybytes()], pa.binary())})
    for row in frame.mapInArrow(pack, "ipc binary").toLocalIterator():
        yield from (b for b in pa.ipc.open_stream(row.ipc).read_all().to_batches() if b.num_rows)


ROWS_PER_GROUP = 1 << 20   # a Parquet row group: what one write of a whole table would make


class ParquetStream:
    """One Parquet file written a table at a time, in row groups of ROWS_PER_GROUP rows (tables are held
    until they make one). Every table has the file's schema: `schema`, else the first table's. With no
    table written the file has `schema` and no rows; a stream left by an error removes its file."""

    def __init__(self, path: Path, schema: pa.Schema | None = None) -> None:
        self.path, self.schema = path, schema
        self._writer: pq.ParquetWriter | None = None
        self._held: list[pa.Table] = []
        self._rows = 0

    def write(self, table: pa.Table) -> None:
        """Append a table's rows."""
        self.schema = self.schema or table.schema
        if not table.schema.equals(self.schema):
            raise ValueError(f"{self.path}: a table with columns {table.schema} after {self.schema}")
        self._held.append(table)
        self._rows += table.num_rows
        if self._rows >= ROWS_PER_GROUP:
            self._flush(whole_groups=True)

    def _flush(self, whole_groups: bool = False) -> None:
        """Write the rows held as row groups of ROWS_PER_GROUP (the last may be smaller unless
        `whole_groups`, which keeps the rows past the last whole group for the next)."""
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, self.schema)
        rows = pa.concat_tables(self._held) if self._held else self.schema.empty_table()
        cut = rows.num_rows - rows.num_rows % ROWS_PER_GROUP if whole_groups else rows.num_rows
        if cut:
            self._writer.write_table(rows.slice(0, cut), row_group_size=ROWS_PER_GROUP)
        rest = rows.slice(cut)
        self._held, self._rows = ([rest] if rest.num_rows else []), rest.num_rows

    def __enter__(self) -> "ParquetStream":
        return self

    def __exit__(self, error: type | None, *exc: object) -> None:
        if error is None:
            if self.schema is not None:
                self._flush()
            if self._writer is not None:
                self._writer.close()
            return
        try:            # the error in flight, not one of closing a broken file, is the run's ending
            if self._writer is not None:
                self._writer.close()
        except Exception:   # noqa: BLE001
            pass
        Path(self.path).unlink(missing_ok=True)


def write_parquet(path: Path, tables: Iterable[pa.Table], schema: pa.Schema | None = None) -> None:
    """Write tables one after another into one Parquet file, holding one at a time."""
    with ParquetStream(path, schema) as out:
        for t in tables:
            out.write(t)


def frame_to_parquet(frame: DataFrame, path: Path, schema: pa.Schema,
                     convert: Callable[[pa.RecordBatch], dict[str, object]]) -> None:
    """Write a frame's rows, in its order, to one Parquet file through the driver a partition at a time,
    each batch turned into the file's columns by `convert`."""
    write_parquet(path, (pa.table(convert(b), schema=schema) for b in partition_batches(frame)), schema)
