"""Arrays every task reads, shipped as memory-mapped files: the workers see the driver's values."""
import tempfile
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

from scribe_spark import ids, topology
from scribe_spark.pastry.kernels import Ring
from scribe_spark.spark.shared import SHARED_MIN_BYTES, share


def _seen(spark, bc, read):
    """What one task in a Python worker reads from the broadcast `bc`, by `read(value)`."""
    def task(batches):
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"out": [repr(read(bc.value))]})
    return spark.range(1, numPartitions=1).mapInArrow(task, "out string").first().out


def test_a_shared_ring_reaches_the_workers_mapped_and_equal(spark):
    rng = np.random.default_rng(3)
    n = 20_000                                            # ids and sorted copies above the size that maps
    hi, lo = ids.random_ids(n, rng)
    ring = Ring(hi, lo, 4, 16, 32, topology.Proximity("plane", coords=rng.random((n, 2))))
    assert ring.shi.nbytes >= SHARED_MIN_BYTES
    bc = share(spark.sparkContext, ring)

    def read(r):
        mapped = sorted(k for k in ("hi", "lo", "order", "pos", "shi", "slo")
                        if isinstance(getattr(r, k), np.memmap))
        return (mapped, isinstance(r.prox.coords, np.memmap), r.prox.coords.flags.writeable, r.token,
                int(r.shi[::97].sum() % 1_000_003), int(r.pos[::89].sum()), float(r.prox.coords.sum()), r.n)
    want = (["hi", "lo", "order", "pos", "shi", "slo"], True, False, ring.token,
            int(ring.shi[::97].sum() % 1_000_003), int(ring.pos[::89].sum()), float(ring.prox.coords.sum()),
            n)
    assert _seen(spark, bc, read) == repr(want)


def test_a_site_models_nodes_by_site_and_site_order_reach_the_workers_mapped(spark):
    rng = np.random.default_rng(5)
    n = 20_000
    hi, lo = ids.random_ids(n, rng)
    prox = topology.on_sites("transit-stub", n, rng.random((200, 200)).astype(np.float32), 1.0, rng, False)
    ring = Ring(hi, lo, 4, 16, 32, prox)      # both made on the driver with the ring, not in each worker
    occupied, starts, members = ring.prox.by_site()
    order = ring.prox.site_order()
    bc = share(spark.sparkContext, ring)

    def read(r):
        got, sites = r.prox.by_site(), r.prox.site_order()
        return (isinstance(got[2], np.memmap), got[2].dtype.str, [int(a.sum()) for a in got],
                isinstance(sites, np.memmap), int((sites[:, :5].astype(np.int64) * np.arange(5)).sum()))
    assert _seen(spark, bc, read) == repr((True, "<i4", [int(occupied.sum()), int(starts.sum()),
                                                         int(members.sum())],
                                           True, int((order[:, :5].astype(np.int64) * np.arange(5)).sum())))
    assert (np.diff(ring.prox.site[members]) >= 0).all() and len(members) == n


def test_small_arrays_and_plain_arrays(spark):
    site = np.arange(50_000, dtype=np.int32) % 7
    bc = share(spark.sparkContext, site)
    assert _seen(spark, bc, lambda a: (type(a).__name__, int(a.sum()), a.dtype.str)) == \
        repr(("memmap", int(site.sum()), site.dtype.str))
    rng = np.random.default_rng(4)
    hi, lo = ids.random_ids(40, rng)                     # a small ring travels inside the stub
    small = Ring(hi, lo, 4, 16, 32, topology.Proximity("plane", coords=rng.random((40, 2))))
    bc = share(spark.sparkContext, small)
    assert _seen(spark, bc, lambda r: (isinstance(r.hi, np.memmap), int(r.order.sum()))) == \
        repr((False, int(small.order.sum())))


def test_a_released_share_leaves_no_files_and_others_stay_readable(spark):
    """release() on a local master removes the share's folder (a bool mask here, as the failure jobs
    share) and leaves the others as they were; a second release does nothing."""
    from scribe_spark.spark import shared
    dead = np.arange(1000) % 3 == 0
    kept, gone = share(spark.sparkContext, dead), share(spark.sparkContext, ~dead)
    folder, local = gone._scribe_share
    assert local and folder.is_dir()
    assert _seen(spark, gone, lambda a: int(a.sum())) == repr(int((~dead).sum()))
    shared.release(gone)
    assert not folder.exists() and folder not in shared._FOLDERS
    shared.release(gone)   # twice: nothing more
    want = (dead.dtype.str, int(dead.sum()))
    assert _seen(spark, kept, lambda a: (a.dtype.str, int(a.sum()))) == repr(want)
    shared.release(kept)


def test_what_a_job_shared_is_freed_when_it_ends_and_nothing_before(spark):
    """free_since(mark) releases the shares made after the mark, by token or not, and the folders tied
    to them; what was shared before stays readable."""
    from scribe_spark.spark import shared
    before = share(spark.sparkContext, np.arange(20_000))
    made = shared.mark()
    mask = share(spark.sparkContext, np.ones(70_000, bool))
    folder, _ = mask._scribe_share
    ringlike = SimpleNamespace(token="t-" + folder.name, a=np.arange(20_000))
    kept = share(spark.sparkContext, ringlike)
    tied = shared.new_folder("tied")
    shared.tie(ringlike.token, tied)
    shared.free_since(made)
    assert not folder.exists() and not tied.exists() and not hasattr(kept, "_scribe_kept")
    assert share(spark.sparkContext, ringlike) is not kept   # shared anew
    assert _seen(spark, before, lambda a: int(a.sum())) == repr(int(np.arange(20_000).sum()))
    shared.free_since(made)
    shared.release(before)


def test_a_worker_lets_go_of_removed_files_when_it_next_opens_a_share(tmp_path, monkeypatch):
    """Released files stay on disk while a map holds them: the worker's cache drops such maps."""
    from scribe_spark.spark import shared
    monkeypatch.setattr(shared, "_OPENED", {})
    monkeypatch.setattr(shared, "_LOCAL_FILES", {})
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, np.arange(10))
    np.save(b, np.arange(5))
    assert int(shared._thaw("a", shared._Mapped(str(a))).sum()) == 45
    a.unlink()   # released
    assert int(shared._thaw("b", shared._Mapped(str(b))).sum()) == 10
    assert list(shared._OPENED) == ["b"] and shared._LOCAL_FILES == {"b": [str(b)]}


def test_a_full_disk_while_sharing_ends_naming_the_folder(monkeypatch, tmp_path):
    import errno

    from scribe_spark.cli import endings
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(np, "save", full)
    try:
        share(SimpleNamespace(master="local[2]"), np.zeros(10))   # it fails before it needs a context
    except OSError as e:
        end = endings.ending(e)
    assert end.code == endings.EXIT_DISK_FULL and f"the disk of {tmp_path}/scribe-shared-" in end.cause


@pytest.mark.parametrize("line", ["spark.local.dir   {d},/elsewhere", "spark.local.dir={d}",
                                  "spark.local.dir: {d}"])
def test_spark_local_dir_in_spark_defaults_is_the_scratch_folder(monkeypatch, tmp_path, line):
    from scribe_spark import sizes
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert sizes.scratch_dir() == tempfile.gettempdir()
    (tmp_path / "spark-defaults.conf").write_text("# spark.local.dir /commented\nspark.local.dir /replaced\n"
                                                   "spark.local.dirs /no\n" + line.format(d=tmp_path / "disk")
                                                   + "\n#spark.local.dir /commented\n")   # the last counts
    assert sizes.scratch_dir() == str(tmp_path / "disk")
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/first,/second")    # Spark's environment variable wins
    assert sizes.scratch_dir() == "/first"
