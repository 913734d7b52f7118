"""Helpers the test modules share (a module of its own: test modules never import each other)."""
from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from scribe_spark import ids, report, topology
from scribe_spark.experiments.registry import JOBS
from scribe_spark.pastry.kernels import Ring
from scribe_spark.reference.pairwise_order import pairwise_check
from scribe_spark.tno import groups
from scribe_spark.tno.live_groups import LiveGroups
from scribe_spark.tno.ordering import Subscriber
from scribe_spark.tno.sequencer import Sequencer
from scribe_spark.tno.simulation import Recovery, Simulation, contiguous_placement, random_ens

ROOT = Path(__file__).resolve().parent.parent


def empty_outcome(job: str):
    """An outcome with every declared table of `job` empty: what a stand-in experiment returns."""
    import pandas as pd

    from scribe_spark.experiments.outputs import Outcome
    return Outcome({name: pd.DataFrame(columns=t.names) for name, t in JOBS[job].outputs.items()
                    if not t.optional})
M = 1 << 128


def plain_python_tasks(frame) -> bool:
    """Whether computing `frame` runs plain (pickled, not Arrow) Python tasks: a PythonRDD in its lineage."""
    return "PythonRDD" in frame._jdf.queryExecution().toRdd().toDebugString()


# test_determinism's jobs: the two that once differed between layouts, and one whose tables are all
# floating point
OTHER_LAYOUT_JOBS = ["scribe_repair", "tno_ordering", "tno_sequencer"]


def start_other_layout(out: Path) -> subprocess.Popen:
    """Start one driver (local[1], 3 shuffle partitions, `partitions = 3` where a job has the key)
    running OTHER_LAYOUT_JOBS on conf/tiny into `out`; its output goes to out/driver.log."""
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[1]", "--driver-memory", "2g",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=3",
           str(ROOT / "bench" / "one_driver.py"), str(out)]
    for name in OTHER_LAYOUT_JOBS:
        has_partitions = "partitions" in JOBS[name].params.__dataclass_fields__
        cmd += [name, *(["--set", "partitions=3"] if has_partitions else []), "--"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "driver.log", "w") as log:   # a file, not a pipe: nobody reads a pipe meanwhile
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def tables(folder: Path) -> dict[str, bytes]:
    """Every table of a run except wall-clock timings, as bytes to compare exactly."""
    return report.comparable_tables(folder)


def small_ring(n, b=4, model="plane", seed=1, leaf=16, nbr=32):
    rng = np.random.default_rng(seed)
    hi, lo = ids.random_ids(n, rng)
    if model == "plane":
        prox = topology.plane(n, rng)
    elif model == "sphere":
        prox = topology.sphere(n, rng)
    elif model == "matrix":   # a latency file: symmetric random delays, one node per row
        m = rng.uniform(1.0, 100.0, size=(n, n)).astype(np.float32)
        m = np.minimum(m, m.T)
        np.fill_diagonal(m, 0.0)
        prox = topology.on_sites("matrix", n, m, 0.0, rng, distinct=True)
    else:
        ts = topology.transit_stub(rng, transit_domains=3, stubs_per_transit_router=4)
        prox = topology.on_sites("transit-stub", n, ts.delay, topology.LAN_DELAY_MS, rng, distinct=False)
    return Ring(hi, lo, b, leaf, nbr, prox)


def int_ids(hi, lo) -> list[int]:
    """128-bit ids given as (hi, lo) arrays, as Python integers."""
    return [(int(h) << 64) | int(l) for h, l in zip(hi, lo)]


def node_ints(ring):
    return int_ids(ring.hi, ring.lo)


def id_arrays(ints) -> tuple[np.ndarray, np.ndarray]:
    """128-bit ids given as Python integers, as (hi, lo) arrays."""
    return (np.array([k >> 64 for k in ints], dtype=np.uint64),
            np.array([k & ((1 << 64) - 1) for k in ints], dtype=np.uint64))


def halfway(ints, a, c) -> list[int]:
    """The ids half way clockwise from each node in a to the node in c (ints: node_ints)."""
    return [(ints[x] + ((ints[y] - ints[x]) % M) // 2) % M for x, y in zip(a, c)]


def closest_brute(ints, key):
    """The numerically closest node by plain Python integers (ties: smaller id)."""
    return min(range(len(ints)), key=lambda i: (min((ints[i] - key) % M, (key - ints[i]) % M), ints[i]))


def tno_scenario(seed, *, causal_groups=True, ordered=True, broken=False, chains="etree", sub_changes=0,
             unsubs=0, loss=0.0, ttl=None, buffer_size=None, clients=30, topics=12, events=400,
             service_ms=0.0, recovery=None, live=False):
    """Random subscriptions, random publication times/publishers/topics, random ENS delays; `live`:
    groups that follow the subscriptions (chains laid over the groups of every subscription)."""
    rng = np.random.default_rng(seed)
    subs = {c: set(rng.choice(topics, int(rng.integers(1, 5)),
                              replace=False).tolist()) for c in range(clients)}
    later = {int(c): set(rng.choice(topics, 2, replace=False).tolist())
             for c in rng.choice(clients, sub_changes, replace=False)}
    g = groups.local_groups({c: subs[c] | later.get(c, set()) for c in subs}, causal=causal_groups)
    for t in range(topics):
        g.setdefault(t, {t})
    rank = {t: int(r) for t, r in zip(range(topics), rng.permutation(topics))}   # any precedence order
    if live:
        start = LiveGroups.start(subs, range(topics), causal_groups)
        seq = Sequencer(g, rank, broken=broken, chains=chains, live=start,
                        together=[subs[c] | later.get(c, set()) for c in subs])
    else:
        seq = Sequencer(g, rank, broken=broken, chains=chains, together=later.values())
    place = contiguous_placement(list(range(topics)), 3, list(range(clients)), 2, rng)
    subscribers = {c: Subscriber(c, set(subs[c]), ordered=ordered, ttl=ttl,
                                 buffer_size=buffer_size) for c in subs}
    rec = None if recovery is None else Recovery(lambda topic, sid: 20.0, np.random.default_rng([seed, 10]),
                                                 sequencer_loss=loss, enabled=recovery)
    sim = Simulation(seq, place, subscribers, random_ens(80.0), rng, loss=loss, service_ms=service_ms,
                     recovery=rec)
    for _ in range(events):
        sim.at(float(rng.uniform(0, 2000)), sim.publish, int(rng.integers(clients)),
               int(rng.integers(topics)))
    for c, ts in later.items():
        sim.at(float(rng.uniform(0, 2000)), sim.subscribe, c, ts)
    for c in rng.choice(clients, unsubs, replace=False):
        own = sorted(subscribers[int(c)].topics)
        sim.at(float(rng.uniform(500, 1500)), sim.unsubscribe, int(c), {own[0]})
    if ttl is not None:
        sim.at(0.0, sim.tick, 25.0, 8000.0)
    sim.run()
    logs = {c: [e for e, *_ in s.log] for c, s in subscribers.items()}
    tags = sum(entry[2] for s in subscribers.values() for entry in s.log)
    return pairwise_check(logs, sum(len(s.waiting) for s in subscribers.values())), tags, sim


@contextmanager
def adaptive_execution_off(spark):
    """Run the block with spark.sql.adaptive.enabled=false (where Spark misses cached frames more)."""
    before = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        yield
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", before)
