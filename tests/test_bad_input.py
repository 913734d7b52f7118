"""Bad input across every job: one line naming the key or the reason, a non-zero exit, no output folder.

All of it is decided by `cli.plan` before Spark starts: in-process here (no Spark session is
created by these tests), and through `./run.sh`, whose pre-start check runs before `spark-submit`.
"""
import os
import subprocess

import pytest

from scribe_spark import capacity, cli, sizes
from scribe_spark.cli import environment
from scribe_spark.cli.args import UsageError
from scribe_spark.cli.endings import EXIT_DONE_ALREADY
from scribe_spark.config import ConfigError, ScribeParams, TnoSizeParams
from tests.helpers import ROOT


def _files(tmp):
    (tmp / "broken.toml").write_text("nodes = [\n")
    (tmp / "odd.txt").write_text("0 1\n1 0\n2 2\n")       # not square
    (tmp / "three.txt").write_text("0 1 2\n1 0 1\n2 1 0\n")   # 3 sites
    (tmp / "a-file").write_text("")
    (tmp / "latin1.toml").write_bytes(b"nodes = [1000]   # Gr\xfc\xdfe\n")   # not UTF-8
    (tmp / "colocated.txt").write_text("0 1 2\n1 0 0\n2 0 0\n")       # sites 1 and 2: no delay between them
    (tmp / "slow.txt").write_text("0 1 2\n1 0 1e9\n2 1e9 0\n")        # a link of 11 days
    (tmp / "trace.csv").write_text("node,start_s,end_s\n" + "".join(f"{i},0,{100 + i}\n" for i in range(50)))
    (tmp / "overlap.csv").write_text("node,start_s,end_s\n" + "".join(f"{i % 45},{i},{100 + i}\n"
                                                                      for i in range(50)))


CASES = [
    ("pastry_hops", ["--set", "b=3"], "key 'b'"),
    ("pastry_hops", ["--set", "leaf_set=15"], "key 'leaf_set'"),
    ("pastry_hops", ["--set", "nodes=[1]"], "key 'nodes'"),
    ("pastry_hops", ["--set", "nodes=[]"], "key 'nodes'"),
    ("pastry_hops", ["--set", "lookups=many"], "key 'lookups': must be an integer"),
    ("pastry_hops", ["--set", "nodes=[1000"], "key 'nodes': must be an integer"),
    ("pastry_hops", ["--set", "nodes=[70000000000]"], "key 'nodes'"),
    ("pastry_hops", ["--set", "proximity=moon"], "key 'proximity'"),
    ("pastry_hops", ["--set", "proximity=matrix"], "key 'matrix'"),
    ("pastry_hops", ["--set", "proximity=matrix", "--set", "matrix=/nonexistent.npy"], "key 'matrix'"),
    ("pastry_hops", ["--set", "proximity=matrix", "--set", "matrix={tmp}/odd.txt", "--set", "nodes=[2]"],
     "key 'matrix'"),
    ("pastry_hops", ["--set", "proximity=matrix", "--set", "matrix={tmp}/three.txt", "--set", "nodes=[4]"],
     "key 'nodes'"),
    ("pastry_hops", ["--set", "topology.edge_prob=2"], "key 'topology.edge_prob'"),
    ("pastry_hops", ["--set", "proximity=transit-stub", "--set", "topology.routers_per_stub=100000"],
     "key 'topology.routers_per_stub': must be in 1..1,000"),
    ("pastry_hops", ["--set", "proximity=transit-stub", "--set", "topology.routers_per_stub=1000", "--set",
                     "topology.stubs_per_transit_router=1000"], "key 'topology'"),
    ("pastry_hops", ["--set", "bogus=1"], "key 'bogus': unknown parameter"),
    ("pastry_hops", ["--set", "nodes"], "expected key=value"),
    ("pastry_hops", ["--set", "save_routes=1"], "key 'save_routes': must be true or false"),
    ("pastry_hops", ["--conf", "{tmp}/missing.toml"], "config file not found"),
    ("pastry_hops", ["--conf", "{tmp}/broken.toml"], "not valid TOML"),
    ("pastry_hops", ["--conf", "{tmp}/latin1.toml"], "latin1.toml: not a TOML file (not UTF-8 text)"),
    ("pastry_hops", ["--conf", "{tmp}"], "is a folder"),
    ("pastry_hops", ["--set", "seed=-1"], "key 'seed'"),
    ("pastry_hops", ["--set", "nodes=[1000,1000]"], "key 'nodes': values must be distinct"),
    ("pastry_hops", ["--set", "partitions=100000000000000000000"], "key 'partitions'"),
    ("pastry_hops", ["--set", "partitions=5000000"], "key 'partitions': must be in 0..10,000"),
    ("pastry_hops", ["--set", "partitions=5000", "--set", "nodes=[1000]"],
     "key 'partitions': must be in 0..nodes"),
    ("pastry_hops", ["--conf", "{tmp}/" + "c" * 300 + ".toml"], "config file not found"),
    ("pastry_hops", ["--set", "proximity=matrix", "--set", "matrix=/" + "m" * 300], "key 'matrix'"),
    ("pastry_hops", ["--set", "topology.delay_stub_stub=inf"], "delay_stub_stub': must be a finite"),
    ("pastry_hops", ["--out", "{tmp}/a-file"], "is not a folder"),
    ("pastry_hops", ["--out", "{tmp}/a-file/below"], "cannot create it"),
    ("pastry_hops", ["--out", "/proc/scribe-out"], "cannot create or write"),
    ("pastry_hops", ["--resume"], "--resume needs --out"),
    ("pastry_hops", ["--frobnicate"], "unrecognized arguments"),
    ("scribe_multicast", ["--set", "topics=0"], "key 'topics'"),
    ("scribe_multicast", ["--set", "group_size=20", "--set", "nodes=10"], "key 'group_size'"),
    ("scribe_multicast", ["--set", "partitions=-1"], "key 'partitions'"),
    ("scribe_multicast", ["--set", "topic_root=creator"], "key 'topic_root'"),
    ("scribe_multicast", ["--set", "topics=100000000000"], "key 'topics'"),
    ("scribe_multicast", ["--set", "topics=100000000", "--set", "group_size=100000"], "key 'topics'"),
    ("scribe_multicast", ["--set", "size_exponent=nan"], "key 'size_exponent': must be a finite"),
    ("churn", ["--set", "topics=100000000000"], "key 'topics'"),
    ("scribe_small_groups", ["--set", "bad_credentials=2.0"], "key 'bad_credentials'"),
    ("scribe_repair", ["--set", "nodes=100", "--set", "topics=60", "--set", "fail_fraction=0.5"],
     "key 'fail_fraction'"),
    ("scribe_repair", ["--set", "replicas=0"], "key 'replicas'"),
    ("scribe_repair", ["--set", "rounds=5"], "key 'rounds'"),
    ("pastry_joins", ["--set", "initial=1"], "key 'initial'"),
    ("pastry_joins", ["--set", 'improve=["rows", "rows"]'], "key 'improve'"),
    ("pastry_joins", ["--set", 'improve=["everything"]'], "key 'improve'"),
    ("pastry_failures", ["--set", "fail_fraction=1.0"], "key 'fail_fraction'"),
    ("pastry_failures", ["--set", "table_repair=foo"], "key 'table_repair'"),
    ("churn", ["--set", "failure_timeout_s=2.5"], "must exceed every round trip"),
    ("churn", ["--set", "nodes=30000"], "key 'check'"),
    ("churn", ["--set", "bin_s=700"], "key 'bin_s'"),
    ("churn", ["--set", "keepalive_s=0"], "key 'keepalive_s'"),
    ("churn", ["--set", "recover_share=1", "--set", "mean_session_s=[0.2]", "--set",
                      "mean_downtime_s=0.2"], "at most 1,000 sessions per node"),
    ("churn", ["--set", "downtime=pareto", "--set", "downtime_pareto_shape=1"],
     "key 'downtime_pareto_shape'"),
    ("churn", ["--set", "downtime_weibull_shape=0.5"], "key 'downtime_weibull_shape'"),
    ("churn", ["--set", "warmup_s=15"], "key 'warmup_s': must be a whole number of bins"),
    ("churn", ["--set", "warmup_s=600"], "key 'warmup_s'"),
    ("churn", ["--set", "start=steady", "--set", "recover_share=0.9"],
     "key 'start': steady needs recover_share = 1"),
    ("churn", ["--set", "start=steady", "--set", "recover_share=1", "--set", "nodes=50",
                      "--set", "mean_session_s=60", "--set", "mean_downtime_s=60"],
     "key 'start': steady leaves about nodes x mean_session_s / (mean_session_s + mean_downtime_s) = 25"),
    ("tno_timestamp_size", ["--set", "topics_per_client=[0]"], "key 'topics_per_client'"),
    ("tno_timestamp_size", ["--set", 'popularity=["flat"]'], "key 'popularity'"),
    ("tno_timestamp_size", ["--set", "clients=100000000000"], "key 'clients'"),
    ("tno_timestamp_size", ["--set", "topics=70000000000"], "key 'topics'"),
    ("tno_timestamp_size", ["--set", "topics_per_client=[5,5]"], "key 'topics_per_client'"),
    ("tno_timestamp_size", ["--set", "seed=-1"], "key 'seed'"),
    ("tno_sequencer", ["--set", "duration_s=inf"], "key 'duration_s': must be a finite"),
    ("tno_sequencer", ["--set", "rates=[inf]"], "key 'rates': must be a finite"),
    ("tno_sequencer", ["--set", "duration_s=100000000"], "key 'duration_s': must be in [1, 86,400]"),
    ("tno_sequencer", ["--set", "duration_s=86400", "--set", "rates=[1e7]"], "keys 'rates' and 'duration_s'"),
    ("tno_sequencer", ["--set", "service_sweep_ms=[0.1,0.1]"], "key 'service_sweep_ms'"),
    ("pastry_hops", ["--out", "{tmp}/new/" + "n" * 300 + "/deeper"], "File name too long"),
    ("tno_ordering", ["--set", "topics=70000000000"], "key 'topics'"),
    ("tno_ordering", ["--set", "ttl_ms=inf"], "key 'ttl_ms': must be a finite"),
    ("tno_sequencer", ["--set", "duration_s=1e306"], "key 'duration_s': must be in [1, 86,400] (got 1e+306)"),
    ("tno_sequencer", ["--set", "subscription_rate=1e12"], "key 'subscription_rate': must be in (0, 1e+07]"),
    ("tno_sequencer", ["--set", "subscription_rate=1e7", "--set", "duration_s=86400"],
     "keys 'subscription_rate' and 'duration_s'"),
    ("tno_sequencer", ["--set", "clients=100000000", "--set", "topics_per_client=1", "--set",
                       "subscription_sweep=[1000]"], "key 'clients'"),
    ("scribe_repair", ["--set", "rounds=1000000000"], "key 'rounds'"),
    ("pastry_hops", ["--set", "lookups=1" + "0" * 320], "key 'lookups': must fit in 64 bits"),
    ("pastry_hops", ["--set", "topology.edge_prob=1" + "0" * 320], "edge_prob': must fit in 64 bits"),
    ("pastry_hops", ["--out", "{tmp}/" + "a" * 300], "--out "),
    ("tno_sequencer", ["--set", "rates=[0.0]"], "key 'rates'"),
    ("tno_sequencer", ["--set", "duration_s=0.5"], "key 'duration_s'"),
    ("tno_sequencer", ["--set", "deployment=moon"], "key 'deployment'"),
    ("tno_sequencer", ["--set", 'chains=["etree", "etree"]'], "key 'chains'"),
    ("tno_ordering", ["--set", 'chains=["spiral"]'], "key 'chains'"),
    ("tno_sequencer", ["--set", "regions=3"], "key 'regions'"),
    ("tno_sequencer", ["--set", "precedence=popular_last"], "key 'precedence'"),
    ("tno_sequencer", ["--set", "subscription_sweep=[2000]"], "key 'subscription_sweep'"),
    ("tno_timestamp_size", ["--set", 'popularity=["pareto:-1"]'], "key 'popularity'"),
    ("tno_ordering", ["--set", "clients=5000"], "key 'clients'"),
    ("tno_ordering", ["--set", "jitter=1.5"], "key 'jitter'"),
    ("tno_ordering", ["--set", "engine=gpu"], "key 'engine'"),
    ("tno_ordering", ["--set", "topology.transit_domains=0"], "key 'topology.transit_domains'"),
    ("no_such_job", [], "unknown experiment"),
    ("churn", ["--set", "session=lognormal"], "key 'session'"),
    ("churn", ["--set", "weibull_shape=0.5"], "key 'weibull_shape': only used with session = 'weibull'"),
    ("churn", ["--set", "session=pareto", "--set", "pareto_shape=1"], "key 'pareto_shape'"),
    ("churn", ["--set", "session=trace"], "key 'trace': must name a session trace file"),
    ("churn", ["--set", "session=trace", "--set", "trace={tmp}/nowhere.csv"], "key 'trace': file not found"),
    ("churn", ["--set", "session=trace", "--set", "trace={tmp}/colocated.txt"],
     "key 'trace': its header must"),
    ("churn", ["--set", "session=trace", "--set", "trace={tmp}/overlap.csv"], "overlapping sessions"),
    ("churn", ["--set", "session=trace", "--set", "trace={tmp}/trace.csv"],
     "key 'nodes': must equal the trace's sessions under way at time 0 (50)"),
    ("pastry_hops", ["--set", "join_batch=100"], "key 'join_batch': only used with overlay = 'joined'"),
    ("pastry_hops", ["--set", "overlay=grown"], "key 'overlay'"),
    ("pastry_hops", ["--set", "overlay=joined", "--set", "join_initial=1000"], "key 'join_initial'"),
    ("scribe_multicast", ["--set", "overlay=joined", "--set", "join_initial=8"], "key 'join_initial'"),
    ("scribe_multicast", ["--set", "overlay=joined", "--set", "join_batch=1"],
     "keys 'nodes', 'join_initial'"),
    # what the run needs, beyond each value's own range
    ("pastry_hops", ["--set", "proximity=matrix", "--set", "matrix={tmp}/colocated.txt", "--set", "nodes=[3]",
                     "--set", "leaf_set=2", "--set", "neighborhood=1"],
     "delay 0 between distinct sites 1 and 2"),
    ("pastry_hops", ["--set", "proximity=matrix", "--set", "matrix={tmp}/slow.txt", "--set", "nodes=[3]"],
     "delays must be at most 100,000 ms"),
    ("pastry_hops", ["--set", "matrix={tmp}/three.txt"], "key 'matrix': only used with proximity = 'matrix'"),
    ("pastry_failures", ["--set", "topology.edge_prob=0.5"],
     "key 'topology': only used with proximity = 'transit-stub'"),
    ("scribe_multicast", ["--set", "proximity=plane", "--set", "topology.edge_prob=0.5"],
     "key 'topology': only used with proximity = 'transit-stub'"),
    ("scribe_small_groups", ["--set", "proximity=matrix"], "key 'matrix'"),
    ("pastry_hops", ["--set", "nodes=[10, 1000]"],
     "key 'leaf_set': must be below the overlay's size (10 nodes)"),
    ("scribe_multicast", ["--set", "nodes=20", "--set", "topics=5"], "key 'neighborhood': must be below"),
    ("pastry_hops", ["--set", "topology.delay_stub_stub=1e39"], "key 'topology.delay_stub_stub': must be in"),
    ("tno_sequencer", ["--set", "service_ms=1e300"], "key 'service_ms': must be in [0, 10,000]"),
    ("tno_ordering", ["--set", "rate=0.001"], "keys 'events', 'rate' and 'ttl_ms'"),
    ("tno_ordering", ["--set", "loss=0.9"], "key 'loss': must be in [0, 0.5]"),
    ("pastry_joins", ["--set", "batch=1"], "keys 'nodes', 'initial' and 'batch'"),
    ("pastry_hops", ["--set", "partitions=1000000"], "key 'partitions': must be in 0..10,000"),
]


@pytest.mark.parametrize("name, args, reason", CASES, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(CASES)])
def test_bad_input_is_one_line_before_spark(tmp_path, capsys, name, args, reason):
    _files(tmp_path)
    out = tmp_path / "out"
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "--out" not in args and "--resume" not in args:
        args += ["--out", str(out)]
    assert cli.main(name, args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{name}: error: ") and reason in err[0], err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "broken.toml", "colocated.txt",
                                                          "latin1.toml", "odd.txt", "overlap.csv", "slow.txt",
                                                          "three.txt", "trace.csv"]


def test_there_are_at_least_30_bad_inputs_across_all_jobs():
    from scribe_spark.experiments.registry import JOBS
    assert len(CASES) >= 30 and {n for n, _, _ in CASES} >= set(JOBS)


@pytest.mark.parametrize("args, reason", [
    (["pastry_hops", "--set", "b=3"], "pastry_hops: error: key 'b'"),
    (["tno_ordering", "--conf", "{tmp}/broken.toml"], "tno_ordering: error: "),
    (["churn", "--out", "{tmp}/a-file"], "churn: error: --out"),
    (["scribe_repair", "--set", "nodes=100", "--set", "topics=60", "--set", "fail_fraction=0.5"],
     "scribe_repair: error: key 'fail_fraction'"),
    (["pastry_hops", "--set", "nodes=[70000000000]"], "pastry_hops: error: key 'nodes'"),
    (["no_such_job"], "run.sh: unknown experiment"),
    (["pastry_hops", "--master", "moon"], "pastry_hops: error: --master 'moon': not a Spark master URL"),
    (["tno_sequencer", "--set", "duration_s=inf"], "tno_sequencer: error: key 'duration_s'"),
])
def test_run_sh_stops_bad_input_before_spark_submit(tmp_path, args, reason):
    _files(tmp_path)
    out = tmp_path / "out"
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    res = subprocess.run(["./run.sh", *args, *([] if "--out" in args else ["--out", str(out)])], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stdout == ""                      # no job started: it would log its first line to stdout
    lines = [x for x in res.stderr.splitlines() if not x.startswith("run.sh: install")]
    assert len(lines) == 1 and lines[0].startswith(reason), res.stderr
    assert not out.exists()


def test_run_sh_help_lists_the_options_and_starts_nothing(tmp_path):
    res = subprocess.run(["./run.sh", "pastry_hops", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("usage: pastry_hops") == 1 and "--resume" in res.stdout   # once, by the check
    assert "writing to" not in res.stdout   # the job's first line: no job ran
    assert cli.check("pastry_hops", ["--help"]) == EXIT_DONE_ALREADY   # run.sh's "nothing to run"


def test_reproduce_refuses_a_bad_master_in_one_line(capsys):
    from scribe_spark import reproduce
    assert reproduce.main(["--master", "moon"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["reproduce: error: --master 'moon': not a Spark master URL (local, local[N], local[*], "
                   "spark://HOST:PORT, yarn or k8s://URL)"]


@pytest.mark.parametrize("master, ok", [("local", True), ("local[2]", True), ("local[*]", True),
                                        ("local[2,3]", True), ("local-cluster[2,1,1024]", True),
                                        ("local[2, 3]", True), ("local[04]", True),
                                        ("local-cluster[2, 1, 1024]", True),
                                        ("spark://127.0.0.1:7077", True), ("yarn", True),
                                        ("k8s://https://host:6443", True), ("moon", False),
                                        ("local[0]", False), ("local[two]", False), ("", False),
                                        ("spark://", False)])
def test_the_master_is_one_spark_submit_takes(master, ok):
    if ok:
        environment.check_master(master)
    else:
        with pytest.raises(UsageError, match=r"^--master '.*': not a Spark master URL"):
            environment.check_master(master)


def test_scribe_subscriptions_are_counted_as_the_workload_makes_them():
    from scribe_spark.workloads.scribe_groups import group_sizes
    for p in (ScribeParams(nodes=100_000), ScribeParams(nodes=5000, topics=300, min_size=7),
              ScribeParams(nodes=5000, topics=40, group_size=12)):
        assert sizes.subscriptions(p) == group_sizes(p).sum()
    # past the ranks summed exactly, each topic counts its least size: exact where the law gives that ...
    many = ScribeParams(nodes=1000, topics=sizes.EXACT_RANKS + 5000, min_size=3)
    assert sizes.subscriptions(many) == group_sizes(many).sum()
    # ... and below the workload where it gives more
    big = ScribeParams(nodes=100_000_000, topics=sizes.EXACT_RANKS + 5000)
    head = group_sizes(big)[:sizes.EXACT_RANKS].sum()
    assert sizes.subscriptions(big) == head + 5000 < group_sizes(big).sum()


def test_run_sh_names_a_bad_driver_memory(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "SCRIBE_DRIVER_MEMORY": "lots"}
    res = subprocess.run(["./run.sh", "pastry_hops", "--out", str(out)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env=env)
    lines = [x for x in res.stderr.splitlines() if not x.startswith("run.sh: install")]
    assert res.returncode == 2 and res.stdout == "" and not out.exists()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("pastry_hops: error: SCRIBE_DRIVER_MEMORY: 'lots'"), res.stderr


GiB = 1 << 30


@pytest.mark.parametrize("text, size", [("8g", 8 * GiB), ("512m", 512 << 20), ("1024k", 1 << 20),
                                        ("2T", 2 << 40), ("3G", 3 * GiB)])
def test_java_memory_sizes_read_as_spark_submit_reads_them(text, size):
    assert capacity.memory_bytes(text, "SCRIBE_DRIVER_MEMORY") == size


# the JVM refuses '3gb' and '1.5g' as -Xmx; digits alone are bytes to the JVM and MiB to Spark
@pytest.mark.parametrize("text", ["lots", "", "g", "1.5g", "-1g", "8x", "3gb", "4096", "08g"])
def test_a_memory_size_that_is_not_one_names_the_knob(text):
    with pytest.raises(ConfigError, match="^SCRIBE_DRIVER_MEMORY: "):
        capacity.memory_bytes(text, "SCRIBE_DRIVER_MEMORY")


@pytest.mark.parametrize("master, workers", [("local", 1), ("local[3]", 3), ("local[2,4]", 2),
                                             ("local[*]", os.cpu_count()), ("spark://host:7077", 0)])
def test_python_workers_on_this_machine_follow_the_master(master, workers):
    assert capacity.local_workers(master) == workers


def test_the_ring_copies_must_fit_beside_the_jvm_heap():
    p = ScribeParams(nodes=1_000_000)
    one = capacity.ring_bytes(p)
    assert one == 1_000_000 * 56 + p.topology.routers ** 2 * 6
    # the driver's copy and the one file every local worker maps: 2 copies, whatever the workers
    capacity.check(p, limit=8 * GiB + 2 * one + 1, heap="8g", master="local[4]")
    with pytest.raises(ConfigError, match=r"^key 'nodes': the ring .* mapped by the local Python workers.*"
                                          r"SCRIBE_DRIVER_MEMORY\); lower 'nodes' or SCRIBE_DRIVER_MEMORY$"):
        capacity.check(p, limit=8 * GiB + 2 * one - 1, heap="8g", master="local[2]")
    # on a cluster the workers are elsewhere: one copy on this machine
    capacity.check(p, limit=8 * GiB + one + 1, heap="8g", master="spark://host:7077")


def test_a_ring_drawn_in_spark_is_one_copy_for_all_and_its_files_go_to_the_local_disk():
    from scribe_spark.workloads.network import RING_BLOCK
    p = ScribeParams(nodes=RING_BLOCK + 1, proximity="plane")
    one = capacity.ring_bytes(p)
    # the driver maps the ring's files as the local workers do: one copy in the page cache
    capacity.check(p, limit=8 * GiB + one + 1, heap="8g", master="local[2]", disk=1 << 50)
    with pytest.raises(ConfigError, match=r"^key 'nodes': the ring of 1,048,577 nodes, drawn in Spark and "
                                          r"mapped from files by the Python driver and the local Python "
                                          r"workers, needs at least "):
        capacity.check(p, limit=8 * GiB + one - 1, heap="8g", master="local[2]", disk=1 << 50)
    _, state, _ = p.state_need()
    capacity.check(p, limit=64 * GiB, heap="1g", master="local[2]", disk=state + one - GiB)
    with pytest.raises(ConfigError, match=r"^key 'nodes': the Pastry state of 1,048,577 nodes with its "
                                          r"ring's files needs at least "):
        capacity.check(p, limit=64 * GiB, heap="1g", master="local[2]", disk=state + one - GiB - 1)


def test_a_heap_as_large_as_the_machine_is_refused():
    with pytest.raises(ConfigError, match="^SCRIBE_DRIVER_MEMORY: a JVM heap of 24.0 GiB leaves nothing"):
        capacity.check(ScribeParams(nodes=1000), limit=24 * GiB, heap="24g", master="local[2]")


def test_parts_that_fit_alone_but_not_together_name_the_largest():
    p = ScribeParams(nodes=1_000_000)
    parts = p.needs()
    largest, total = max(size for _, size, _ in parts), sum(size for _, size, _ in parts)
    assert largest < total
    with pytest.raises(ConfigError, match=r"^key 'topology': this run needs at least .* in all, .*; its "
                                          r"largest part is all-pairs delays of 5,050 routers "
                                          r"\(.*\): lower 'topology'$"):
        capacity.check(p, limit=(largest + total) // 2, heap="1k", master="local[2]")
    named, lower = sizes.knob_names(("rates", "duration_s", "x"))
    assert (named, lower) == ("keys 'rates', 'duration_s' and 'x'", "'rates', 'duration_s' or 'x'")


def test_the_node_state_may_spill_to_local_disk_but_must_fit_heap_and_disk():
    p = ScribeParams(nodes=10_000_000, proximity="plane")
    _, state, _ = p.state_need()
    arrays = sum(size for _, size, _ in p.needs())
    # the state alone is larger than the whole machine here, and passes: Spark spills it
    limit = GiB + 2 * capacity.ring_bytes(p) + arrays
    assert state > limit
    files = capacity.ring_bytes(p)     # a ring of 10M nodes is drawn in Spark, its files beside the state
    capacity.check(p, heap="1g", master="local[2]", limit=limit, disk=state + files - GiB)
    with pytest.raises(ConfigError, match=r"^key 'nodes': the Pastry state of 10,000,000 nodes with its "
                                          r"ring's files needs at "
                                          r"least .* more than the JVM heap of 1.0 GiB "
                                          r"\(SCRIBE_DRIVER_MEMORY\) and the .* free in Spark's local "
                                          r"folder .* hold together .*; "
                                          r"lower 'nodes', or point SPARK_LOCAL_DIRS at a larger disk$"):
        capacity.check(p, heap="1g", master="local[2]", limit=limit, disk=state + files - GiB - 1)
    # on a cluster the state is on the executors' machines
    capacity.check(p, heap="1g", master="spark://host:7077", limit=limit, disk=0)


def test_an_overlay_expected_above_the_machine_is_warned_of_not_refused():
    p = ScribeParams(nodes=25_000_000)
    line = capacity.peak_warning(p, "8g", "local[2]", limit=12 * GiB)
    # the measured figures: the driver's peak, each worker's own fixed part and per node, and the files
    # the workers and the driver map (the ring among them) once
    n, ring = 25_000_000, capacity.RING_BYTES_PER_NODE["transit-stub"]
    expected = (8 * GiB + 9 * GiB // 10 + 700 * 2**20 + 2 * (190 * 2**20 + 18 * n) + ring * n + 140 * 2**20)
    assert capacity.expected_peak(p, 8 * GiB, "local[2]") == expected
    assert line.startswith(f"key 'nodes': an overlay of up to 25,000,000 nodes may need up to about "
                           f"{expected / GiB:.1f} GiB (the JVM heap SCRIBE_DRIVER_MEMORY=8g; the Python "
                           f"driver's 700.0 MiB; per node, ")
    assert "in each of 2 local Python workers" in line and line.endswith("(--master local[N])")
    # each local worker adds its own part; the driver's is there on any master, and it maps the ring
    # drawn in Spark on any master too; the workers' other shared files once
    assert (capacity.expected_peak(p, 0, "local[4]") - capacity.expected_peak(p, 0, "local[2]")
            == 2 * (190 * 2**20 + 18 * n))
    assert (capacity.expected_peak(p, 0, "local[1]") - capacity.expected_peak(p, 0, "spark://host:7077")
            == 190 * 2**20 + 18 * n + 140 * 2**20)
    # a ring of one block the driver holds itself, beside the file the local workers map
    small = ScribeParams(nodes=1_000_000)
    assert (capacity.expected_peak(small, 0, "local[1]") - capacity.expected_peak(small, 0, "spark://h:1")
            == 190 * 2**20 + 18 * 1_000_000 + ring * 1_000_000 + 140 * 2**20)
    # below the machine, on a cluster (the workers are elsewhere), and for runs with no overlay: no line
    assert capacity.peak_warning(p, "8g", "local[2]", limit=expected) is None
    assert capacity.peak_warning(p, "8g", "spark://host:7077", limit=12 * GiB) is None
    assert capacity.peak_warning(TnoSizeParams(), "8g", "local[2]", limit=1) is None


def test_run_sh_check_prints_the_warning_and_goes_on(monkeypatch, capsys):
    # 1,000 nodes fit every lower bound in 8.5 GiB beside an 8 GiB heap, but not the estimated peak
    monkeypatch.setenv("SCRIBE_DRIVER_MEMORY", "8g")
    monkeypatch.setenv("SCRIBE_MASTER", "local[2]")
    monkeypatch.setattr(capacity, "machine_bytes", lambda: 8 * GiB + GiB // 2)
    assert cli.check("scribe_multicast", ["--set", "nodes=1000"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("scribe_multicast: warning: key 'nodes': an overlay of up to 1,000 nodes may "
                          "need up to about")
    assert err.count("\n") == 1


@pytest.mark.parametrize("env, args, code, line", [
    ({"SCRIBE_DRIVER_MEMORY": "3gb"}, [], 2,
     "pastry_hops: error: SCRIBE_DRIVER_MEMORY: '3gb' is not a memory size"),
    ({"SCRIBE_DRIVER_MEMORY": "512m"}, [], 2,
     "pastry_hops: error: SCRIBE_DRIVER_MEMORY: '512m' is not a JVM heap"),
    ({"SCRIBE_SHUFFLE_PARTITIONS": "0"}, [], 2, "pastry_hops: error: SCRIBE_SHUFFLE_PARTITIONS: '0' is not"),
    ({"SCRIBE_SHUFFLE_PARTITIONS": "1000000"}, [], 2, "pastry_hops: error: SCRIBE_SHUFFLE_PARTITIONS: "),
    ({"SCRIBE_DRIVER_MEM": "8g"}, [], 2, "pastry_hops: error: SCRIBE_DRIVER_MEM: not a knob of scribe-spark"),
    ({}, ["--master", "spark://127.0.0.1:9"], 5, "pastry_hops: error: --master spark://127.0.0.1:9: no Spark "
                                                 "master answers at 127.0.0.1:9"),
    ({"HADOOP_CONF_DIR": "", "YARN_CONF_DIR": ""}, ["--master", "yarn"], 6,
     "pastry_hops: error: --master yarn: set HADOOP_CONF_DIR or YARN_CONF_DIR"),
])
def test_run_sh_checks_the_knobs_and_the_master_before_spark_submit(tmp_path, env, args, code, line):
    out = tmp_path / "out"
    res = subprocess.run(["./run.sh", "pastry_hops", *args, "--out", str(out)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={**os.environ, **env})
    lines = [x for x in res.stderr.splitlines() if not x.startswith("run.sh: install")]
    assert res.returncode == code and res.stdout == "" and not out.exists()
    assert len(lines) == 1 and lines[0].startswith(line), res.stderr


def test_a_cluster_knob_is_checked_before_the_cluster_starts(tmp_path):
    res = subprocess.run(["./run.sh", "cluster", "start"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "SCRIBE_CLUSTER_PORT": "70000",
                              "SCRIBE_CLUSTER_DIR": str(tmp_path / "cluster")})
    assert res.returncode == 2 and not (tmp_path / "cluster").exists()
    assert res.stderr.splitlines() == [
        "run.sh: error: SCRIBE_CLUSTER_PORT: '70000' is not an integer in 1..65535"]


def test_the_free_disk_of_a_local_folder_spark_has_not_made_yet_is_its_parents(tmp_path):
    assert sizes.free_bytes(str(tmp_path / "not" / "made" / "yet")) > 0
