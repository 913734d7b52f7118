"""Rings and lookups drawn in blocks: one block is the draw of before, and Spark's draw is the driver's."""
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from scribe_spark import ids, topology
from scribe_spark.config import PastryFailuresParams
from scribe_spark.spark import shared
from scribe_spark.spark.shared import share
from scribe_spark.streams import stream
from scribe_spark.workloads import network

ARRAYS = ("hi", "lo", "order", "pos", "shi", "slo")


def _params(model: str) -> PastryFailuresParams:
    return PastryFailuresParams(proximity=model, seed=11)


def _where(ring) -> np.ndarray:
    return ring.prox.coords if ring.prox.coords is not None else ring.prox.site


def test_a_ring_of_one_block_is_drawn_as_a_whole_ring_was():
    n, seed = 3_000, 11
    rng = stream(seed, None, n)
    hi, lo = ids.random_ids(n, rng)
    coords = topology.plane(n, rng).coords
    ring = network.make_ring(n, _params("plane"), seed)
    assert (ring.hi == hi).all() and (ring.lo == lo).all() and (ring.prox.coords == coords).all()


def test_blocks_after_the_first_are_drawn_from_streams_of_their_own():
    a = network.ring_block(3_000, 1, 11, "plane", 0, 1_000)
    b = network.ring_block(3_000, 2, 11, "plane", 0, 1_000)
    assert len(a[0]) == 1_000 and not (a[0] == b[0]).any()
    assert (network.ring_block(3_000, 1, 11, "plane", 0, 1_000)[0] == a[0]).all()


@pytest.mark.parametrize("model", ["plane", "transit-stub"])
def test_a_ring_drawn_and_sorted_in_spark_is_the_drivers_mapped_from_files(spark, monkeypatch, model):
    p = _params(model)
    routers, matrix = network.shared_network(p, p.seed)
    monkeypatch.setattr(network, "RING_BLOCK", 4_000)
    n = 10_000                                      # three blocks, the last one short; arrays that map
    want = network.make_ring(n, p, p.seed, routers, matrix)
    got = network.make_ring(n, p, p.seed, routers, matrix, spark=spark)
    for name in ARRAYS:
        assert isinstance(getattr(got, name), np.memmap), name
        assert getattr(got, name).dtype == getattr(want, name).dtype, name
        assert (getattr(got, name) == getattr(want, name)).all(), name
    assert (_where(got) == _where(want)).all() and _where(got).dtype == _where(want).dtype
    bc = share(spark.sparkContext, got)       # shared as links to the ring's own files, not copies
    assert all(os.stat(getattr(got, name).filename).st_nlink == 2 for name in ARRAYS)

    def task(batches):                        # a local worker maps the driver's very file
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"ino": [os.stat(bc.value.hi.filename).st_ino]})
    ino = spark.range(1, numPartitions=1).mapInArrow(task, "ino long").first().ino
    assert ino == os.stat(got.hi.filename).st_ino
    if model == "transit-stub":
        for a, b in zip(got.prox.by_site(), want.prox.by_site()):
            assert a.dtype == b.dtype and (a == b).all()
        assert isinstance(got.prox.by_site()[2], np.memmap)

    # dropped once no task reads it: its own files and its share's go, and a new share writes it anew
    files = Path(got.hi.filename).parent
    share_folder, local = bc._scribe_kept
    assert local and share_folder.is_dir()
    shared.forget(spark.sparkContext, got)
    assert not files.exists() and not share_folder.exists()
    assert int(got.shi[::97].sum() % 1_000_003) == int(want.shi[::97].sum() % 1_000_003)   # still mapped
    again = share(spark.sparkContext, got)
    assert again is not bc and again is share(spark.sparkContext, got)
    shared.forget(spark.sparkContext, got)
    shared.forget(spark.sparkContext, got)   # twice: nothing more
    # as a job ends: what it made goes (the shares of a mask and of the ring, the ring's files)
    made = shared.mark()
    mask = share(spark.sparkContext, np.zeros(100_000, bool))
    ring_bc = share(spark.sparkContext, got)
    files.mkdir()
    shared.tie(got.token, files)
    shared.free_since(made)
    assert not files.exists() and not hasattr(mask, "_scribe_share") and not hasattr(ring_bc, "_scribe_kept")
    assert share(spark.sparkContext, got) is not ring_bc
    shared.forget(spark.sparkContext, got)


def _small_batches() -> dict:
    """Spark settings under which a small ring's sort reaches the driver in many partitions and batches."""
    return {"spark.sql.adaptive.coalescePartitions.enabled": "false",
            "spark.sql.execution.arrow.maxRecordsPerBatch": "300"}


def _with_conf(spark, conf: dict, fn):
    before = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        return fn()
    finally:
        for k, v in before.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)


def test_the_spark_ring_does_not_depend_on_the_shuffles_partitions(spark, monkeypatch):
    from scribe_spark.workloads import ring_files
    p = _params("sphere")
    monkeypatch.setattr(network, "RING_BLOCK", 700)
    seen = []

    def counted(frame):
        seen.append(0)
        for batch in ring_files_batches(frame):
            seen[-1] += 1
            yield batch
    ring_files_batches = ring_files.partition_batches
    monkeypatch.setattr(ring_files, "partition_batches", counted)
    rings = [_with_conf(spark, {**_small_batches(), "spark.sql.shuffle.partitions": parts},
                        lambda: network.make_ring(2_000, p, p.seed, spark=spark)) for parts in ("1", "7")]
    assert all(n > 3 for n in seen)               # the sorts arrived in several batches each
    assert all((getattr(rings[0], k) == getattr(rings[1], k)).all() for k in ARRAYS)
    assert (rings[0].order == network.make_ring(2_000, p, p.seed).order).all()


def test_a_duplicate_id_across_the_sorts_batches_is_refused(spark, tmp_path):
    import pandas as pd

    from scribe_spark.workloads import ring_files
    rows = pd.DataFrame({"node": np.arange(1_000), "khi": np.arange(1_000), "klo": np.zeros(1_000, np.int64)})
    unique = spark.createDataFrame(rows)
    rows.loc[300, "khi"] = rows.loc[299, "khi"]     # 299 and 300 straddle the batches of 300 rows
    twin = spark.createDataFrame(rows)

    def sort(frame):
        return _with_conf(spark, _small_batches(), lambda: ring_files._sorted(frame, tmp_path, 1_000))
    assert (sort(unique)["order"] == np.arange(1_000)).all()
    with pytest.raises(ValueError, match="duplicate random ids"):
        sort(twin)


def test_no_later_block_draws_from_another_purposes_stream():
    n, seed = 5_000, 11
    firsts = {tuple(stream(seed, purpose, n).integers(0, 2**64, size=2, dtype=np.uint64))
              for purpose in [None, *range(20)]}
    for k in range(1, 20):
        assert tuple(network.ring_block(n, k, seed, "plane", 0, 100)[0][:2]) not in firsts
    from scribe_spark.pastry import overlay as ov
    firsts = {tuple(stream(seed, purpose, n, 1).integers(0, n, size=2)) for purpose in range(20)}
    firsts |= {tuple(stream(seed, purpose, n).integers(0, n, size=2)) for purpose in range(20)}
    for k in range(1, 20):
        assert tuple(ov.lookup_block(n, 4_000, k, 100, seed, 1, (n,))[0][:2]) not in firsts


def test_nodes_grouped_by_site_in_chunks_are_a_stable_sort_by_site():
    site = np.random.default_rng(2).integers(0, 50, size=10_007).astype(np.int32)
    out = np.empty(len(site), np.int32)
    occupied, starts = topology.group_by_site(site, 60, out, chunk=333)
    assert (out == np.argsort(site, kind="stable")).all()
    counts = np.bincount(site, minlength=60)
    assert (occupied == np.flatnonzero(counts)).all()
    assert (np.diff(starts) == counts[occupied]).all() and starts[0] == 0


def test_a_duplicate_id_is_refused():
    p = _params("plane")
    ring = network.make_ring(10, p, p.seed)
    hi, lo = np.append(ring.hi, ring.hi[3]), np.append(ring.lo, ring.lo[3])
    with pytest.raises(ValueError, match="duplicate"):
        type(ring)(hi, lo, 4, 16, 32, topology.Proximity("plane", coords=np.zeros((11, 2))))


def test_lookups_of_one_block_are_drawn_as_before_and_more_blocks_by_spark_tasks(spark, monkeypatch):
    from scribe_spark.pastry import overlay as ov
    from scribe_spark.streams import Purpose
    p = _params("plane")
    n = 500
    ring = network.make_ring(n, p, p.seed)
    rng = stream(p.seed, Purpose.LOOKUPS, n)
    src = rng.integers(0, n, size=300)
    dst = (src + rng.integers(1, n, size=300)) % n
    one = ov.lookups(spark, ring, 300, p.seed, Purpose.LOOKUPS, n).orderBy("mid").toPandas()
    assert (one["src"] == src).all() and (one["key_lo"].to_numpy().view(np.uint64) == ring.lo[dst]).all()
    monkeypatch.setattr(ov, "LOOKUP_BLOCK", 120)
    got = ov.lookups(spark, ring, 300, p.seed, Purpose.LOOKUPS, n).orderBy("mid").toPandas()
    parts = [ov.lookup_block(n, 300, k, 120, p.seed, Purpose.LOOKUPS, (n,)) for k in range(3)]
    src, dst = (np.concatenate(a) for a in zip(*parts))
    assert (got["mid"] == np.arange(300)).all() and (got["src"] == src).all() and (got["at"] == src).all()
    assert (got["key_hi"].to_numpy().view(np.uint64) == ring.hi[dst]).all()
    assert (got["key_lo"].to_numpy().view(np.uint64) == ring.lo[dst]).all()
    assert (src[:120] == one["src"][:120]).all() and not (src[120:240] == one["src"][120:240]).all()


def test_a_frame_streamed_to_parquet_keeps_its_order_across_partitions_and_batches(spark, tmp_path):
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from scribe_spark.spark import arrow
    frame = spark.range(2_000).selectExpr("id % 7 AS a", "id AS b").orderBy("a", "b")
    schema = pa.schema([("a", pa.int64()), ("twice", pa.int64())])
    path = tmp_path / "t.parquet"
    _with_conf(spark, {**_small_batches(), "spark.sql.shuffle.partitions": "5"},
               lambda: arrow.frame_to_parquet(frame, path, schema, lambda b: {
                   "a": b.column("a"), "twice": pc.multiply(b.column("b"), 2)}))
    got = pq.read_table(path)
    want = sorted((i % 7, 2 * i) for i in range(2_000))
    assert list(zip(got["a"].to_pylist(), got["twice"].to_pylist())) == want
    arrow.frame_to_parquet(frame.limit(0), tmp_path / "none.parquet", schema, lambda b: {})
    assert pq.read_table(tmp_path / "none.parquet").schema == schema


def test_node_tables_come_in_ring_blocks_and_join_into_every_node(monkeypatch):
    from scribe_spark.experiments import overlays
    monkeypatch.setattr(overlays, "RING_BLOCK", 700)
    ring = network.make_ring(2_000, _params("plane"), 11)
    parts = list(overlays.node_tables(ring, numbered=True, overlay_nodes=2_000))
    assert [t.num_rows for t in parts] == [700, 700, 600]
    t = pa.concat_tables(parts)
    assert t.column_names == ["overlay_nodes", "node", "id", "x", "y"]
    assert t["node"].to_pylist() == list(range(2_000)) and set(t["overlay_nodes"].to_pylist()) == {2_000}
    assert t["id"].to_pylist() == list(ids.to_hex(ring.hi, ring.lo))
    assert np.array_equal(t["x"].to_numpy(), ring.prox.coords[:, 0])


def test_a_parquet_stream_writes_whole_row_groups_and_leaves_no_file_after_an_error(monkeypatch, tmp_path):
    import pyarrow.parquet as pq

    from scribe_spark.spark import arrow
    monkeypatch.setattr(arrow, "ROWS_PER_GROUP", 500)
    tables = [pa.table({"a": np.arange(k, k + 300)}) for k in range(0, 2_100, 300)]
    arrow.write_parquet(tmp_path / "t.parquet", tables)
    meta = pq.ParquetFile(tmp_path / "t.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [500, 500, 500, 500, 100]
    assert pq.read_table(tmp_path / "t.parquet")["a"].to_pylist() == list(range(2_100))
    with pytest.raises(ValueError, match="columns"):     # a table unlike the file's first one
        arrow.write_parquet(tmp_path / "u.parquet", [tables[0], pa.table({"b": np.arange(3)})] * 2)
    assert not (tmp_path / "u.parquet").exists()


def test_saved_trees_are_the_frames_rows_sorted_by_topic_then_node(spark, tmp_path):
    from types import SimpleNamespace

    import pyarrow.parquet as pq

    from scribe_spark.experiments import scribe_multicast
    ring = network.make_ring(500, _params("plane"), 11)
    rng = np.random.default_rng(5)
    edges = np.unique(np.column_stack([rng.integers(0, 3, 400), rng.integers(0, 500, 400)]), axis=0)
    parent = rng.integers(0, 500, len(edges))
    order = rng.permutation(len(edges))                   # the frame's rows in no particular order
    rows = [(int(t), int(c), int(d)) for t, c, d in zip(edges[order, 0], edges[order, 1], parent[order])]
    frame = spark.createDataFrame(rows, "topic long, src long, dst long")
    topics = SimpleNamespace(hi=np.array([7, 8, 9], np.uint64), lo=np.array([1, 2, 3], np.uint64))
    run = SimpleNamespace(path=lambda name: tmp_path / name)
    subs = spark.createDataFrame([(int(t), int(c)) for t, c in edges[order]], "topic long, node long")
    scribe_multicast._save_trees(SimpleNamespace(edges=frame), subs, ring, topics, run)
    got = pq.read_table(tmp_path / "trees.parquet").to_pandas()
    hexes = ids.to_hex(ring.hi, ring.lo)
    assert list(got.child) == list(hexes[edges[:, 1]]) and list(got.parent) == list(hexes[parent])
    assert list(got.topic) == list(ids.to_hex(topics.hi, topics.lo)[edges[:, 0]])
    subscribed = pq.read_table(tmp_path / "subscriptions.parquet")["node"].to_pylist()
    assert subscribed == list(hexes[edges[:, 1]])
    nodes = pq.read_table(tmp_path / "nodes.parquet")
    assert nodes.column_names == ["id", "x", "y"] and nodes["id"].to_pylist() == list(hexes)
