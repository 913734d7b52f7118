"""T3's subscriber replay in one process: seconds per notification, this tree against an older one.

    .venv/bin/python bench/replay_bench.py capture FILE [--every 100] -- [tno_ordering arguments]
    .venv/bin/python bench/replay_bench.py time FILE [--baseline DIR] [--settings tno unreliable ...]

`capture` runs `tno_ordering` (e.g. `--conf conf/scale/tno_ordering.toml`) until its first replay
(the `tno` scenario's, on the spark engine) and saves what every `every`-th subscriber's grouped
task gets: its deliveries, the events released, its topics, the loss key. No output folder stays.

`time` runs the replay task (`tno.replay._task`, as Spark calls it per subscriber) over the captured
subscribers under five settings: `tno` and `no_ordering` as captured; `unreliable` (2% ENS loss,
TTL 2 s, buffer 100, ticks); `changes` (every third subscriber adds a topic its events mention,
whose counters it never gets: a buffer that grows); `recovery` (as unreliable, with gap recovery;
two slots in three released at once, the rest never). It prints seconds, microseconds per output
row and a digest of the output rows per setting. The events' timestamp dictionaries are built
before timing, as a Spark worker holds them after its first tasks. With `--baseline DIR` (e.g. a
`git worktree` of an older commit) the same runs on that tree in its own process, and the digests
must be equal.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = ["tno", "no_ordering", "unreliable", "changes", "recovery"]


def capture(path: Path, every: int, job_args: list[str]) -> int:
    """Run tno_ordering until its first replay; save every `every`-th subscriber's task inputs."""
    sys.path.insert(0, str(ROOT))
    # what run.sh gives spark-submit (a JVM started from Python has 1 GiB and 200 shuffle partitions)
    env = os.environ.get
    submit = (f"--driver-memory {env('SCRIBE_DRIVER_MEMORY', '8g')} --conf "
              f"spark.sql.shuffle.partitions={env('SCRIBE_SHUFFLE_PARTITIONS', '8')} pyspark-shell")
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", submit)
    from pyspark.sql import functions as F

    from scribe_spark.cli import main
    from scribe_spark.tno import replay

    def grab(deliveries, events, make, changes, ticks, loss, key, *_args, **_kw):
        clients = deliveries.agg(F.max("sub")).first()[0] + 1
        subs = list(range(0, clients, every))
        pdf = deliveries.where(F.col("sub").isin(subs)).toPandas()
        with open(path, "wb") as f:
            pickle.dump({"deliveries": pdf, "events": events.value, "key": key,
                         "topics": {s: set(make(s).topics) for s in subs}}, f)
        print(f"captured {len(pdf):,} deliveries of {len(subs)} subscribers in {path}", file=sys.stderr)
        raise SystemExit(0)

    replay.replay_frame = grab
    with tempfile.TemporaryDirectory() as out:
        try:
            code = main("tno_ordering", job_args + ["--out", out])
        except SystemExit as e:
            return int(e.code or 0)
    if code == 0:
        print("tno_ordering ended before a replay: is engine = \"spark\"?", file=sys.stderr)
    return code or 1


def child(tree: str, path: Path, settings: list[str]) -> None:
    """Time each setting in this process with `tree` first on sys.path; print one JSON line."""
    sys.path.insert(0, tree)
    import pyarrow as pa

    from scribe_spark.tno import replay as rp
    from scribe_spark.tno.ordering import Subscriber
    from scribe_spark.tno.simulation import Gaps

    with open(path, "rb") as f:
        d = pickle.load(f)

    class Value:                       # what a Broadcast gives a task
        def __init__(self, value):
            self.value = value

    class Rtt:                         # topic -> round trip to the Scribe parent (ms)
        def __getitem__(self, topic: int) -> float:
            return 40.0 + topic % 7

    known, topics = d["events"], d["topics"]
    for ev in known.values():
        ev.tsd()
    groups = {int(s): pa.Table.from_pandas(g[["sub", "eid", "topic", "at"]], preserve_index=False)
              for s, g in d["deliveries"].groupby("sub")}
    ticks = rp.tick_times(400.0, max(float(d["deliveries"]["at"].max()), 0.0) + 40_000.0)
    slots = Value({(u, ev.tsd()[u]): (0.0 if ev.eid % 3 else float("inf"), ev.eid)
                   for ev in known.values() for u in ev.own})
    rtt = {s: Rtt() for s in groups}
    changes = {}
    for s in list(groups)[::3]:
        mentioned = sorted({t for e in groups[s].column("eid").to_pylist()[:50] for t, _ in known[e].ts}
                           - topics[s])
        if mentioned:
            t = mentioned[len(mentioned) // 2]
            changes[s] = rp.Change(50_000.0, frozenset({t}), 50_300.0, {t: 40})

    def sub(ordered: bool = True, lossy: bool = False):
        return lambda s: Subscriber(s, set(topics[s]), ordered=ordered, ttl=2000.0 if lossy else None,
                                    buffer_size=100 if lossy else None)
    table = {"tno": (sub(), [], 0.0, {}, None), "no_ordering": (sub(False), [], 0.0, {}, None),
             "unreliable": (sub(lossy=True), ticks, 0.02, {}, None),
             "changes": (sub(), [], 0.0, changes, None),
             "recovery": (sub(lossy=True), ticks, 0.02, {}, Gaps(7, 0.02, 50.0, 300.0))}
    got = {}
    for name in settings:
        make, tk, loss, moves, gaps = table[name]
        task = rp._task(Value(known), make, moves, tk, loss, d["key"], gaps, slots, rtt)
        t0 = time.perf_counter()
        outs = [task(g) for g in groups.values()]
        seconds = time.perf_counter() - t0
        digest, rows = hashlib.sha256(), 0
        for out in outs:
            rows += out.num_rows
            for c in out.columns:
                digest.update(str(c.to_pylist()).encode())
        got[name] = {"seconds": seconds, "rows": rows, "digest": digest.hexdigest()[:16]}
    print(json.dumps(got))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    cap = sub.add_parser("capture")
    cap.add_argument("file", type=Path)
    cap.add_argument("--every", type=int, default=100)
    tm = sub.add_parser("time")
    tm.add_argument("file", type=Path)
    tm.add_argument("--baseline", type=Path, help="an older source tree to compare with")
    tm.add_argument("--settings", nargs="+", choices=SETTINGS, default=SETTINGS)
    tm.add_argument("--child", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    job_args = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.mode == "capture":
        return capture(args.file, args.every, job_args)
    if args.child:
        child(args.child, args.file, args.settings)
        return 0
    trees = [("this tree", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    got = {}
    for name, tree in trees:
        cmd = [sys.executable, __file__, "time", str(args.file), "--child", str(tree),
               "--settings", *args.settings]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        got[name] = json.loads(out.splitlines()[-1])
    print("| setting | tree | output rows | seconds | µs per row | digest |")
    print("|---|---|---|---|---|---|")
    for s in args.settings:
        for name, _ in trees:
            r = got[name][s]
            per_row = 1e6 * r["seconds"] / r["rows"]
            print(f"| {s} | {name} | {r['rows']:,} | {r['seconds']:.2f} | {per_row:.1f} | {r['digest']} |")
    if args.baseline:
        differ = [s for s in args.settings if got["this tree"][s]["digest"] != got["baseline"][s]["digest"]]
        if differ:
            print(f"outputs differ from the baseline's: {', '.join(differ)}", file=sys.stderr)
            return 1
        print("outputs identical to the baseline's in every setting")
    return 0


if __name__ == "__main__":
    sys.exit(main())
