"""TNO's ENS and ordering layer on Spark: keyed jitter, dissemination supersteps, and the spark
engine of tno_ordering against the process engine (the discrete-event simulation)."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from scribe_spark import cli
from scribe_spark.tno import replay as rp
from scribe_spark.tno.dissemination import (
    ROOT_HOP,
    disseminate,
    keyed_uniform,
    keyed_uniform_one,
    start_frame,
)
from scribe_spark.tno.ordering import Event, Subscriber
from scribe_spark.tno.scribe_ens import ScribeENS
from scribe_spark.tno.simulation import Asking, Gaps
from tests.helpers import ROOT


def test_keyed_draws_are_uniform_and_a_function_of_key_and_row():
    rows = np.arange(200_000)
    u = keyed_uniform(7, rows, 3, -1)
    assert ((u >= 0) & (u < 1)).all()
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    assert np.array_equal(u[::-1], keyed_uniform(7, rows[::-1], 3, -1))   # the row decides, not the order
    assert np.mean(u == keyed_uniform(8, rows, 3, -1)) < 1e-4           # another key, other draws
    assert np.mean(u == keyed_uniform(7, rows, 4, -1)) < 1e-4           # another column value, too
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.01                  # neighbouring rows independent

    one = [keyed_uniform_one(7, r, 3, -1) for r in (0, 1, 2**40, -5)]       # one at a time: the same draws
    assert one == keyed_uniform(7, np.array([0, 1, 2**40, -5]), 3, -1).tolist()


# two topics' trees over nodes 0..9 (child -> parent); clients 0..3 sit on nodes 9, 4, 7, 2
EDGES = pd.DataFrame({"topic": [0, 0, 0, 0, 0, 1, 1, 1],
                      "src": [1, 2, 3, 4, 9, 7, 5, 2],
                      "dst": [0, 0, 1, 3, 3, 5, 6, 6]})
ROOTS = {0: 0, 1: 6}
CLIENT_NODES = np.array([9, 4, 7, 2])


EDGE_DELAY = np.random.default_rng(3).uniform(1, 50, len(EDGES))


ROUTE = dict(zip([(c, t) for c in range(4) for t in range(2)], np.random.default_rng(4).uniform(5, 80, 8)))


def _ens(jitter=0.4, key=11):
    return ScribeENS(EDGES, EDGE_DELAY, ROOTS, ROUTE, CLIENT_NODES, jitter, key)


def test_tree_delays_add_each_hops_jittered_delay_from_the_publisher_down():
    ens = _ens()
    delay = dict(zip(zip(EDGES.topic, EDGES.src), EDGE_DELAY))
    parent = dict(zip(zip(EDGES.topic, EDGES.src), EDGES.dst))
    for eid, client, topic in [(0, 1, 0), (5, 3, 1), (-2, 0, 0)]:
        receivers = [0, 1, 2, 3]
        got = ens(eid, client, topic, receivers)
        for r, d in zip(receivers, got):
            path, n = [], int(CLIENT_NODES[r])           # the hops from the root down to the receiver
            while (topic, n) in parent:
                path.append(n)
                n = parent[(topic, n)]
            if n != ROOTS[topic]:                            # not in this topic's tree: the root's delay
                path = []
            u = keyed_uniform(11, eid, topic, ROOT_HOP)
            want = ROUTE[(client, topic)] * (1 + 0.4 * (2 * u - 1))
            for node in reversed(path):
                want = want + delay[(topic, node)] * (1 + 0.4 * (2 * keyed_uniform(11, eid, topic, node) - 1))
            assert d == pytest.approx(float(want), rel=1e-12)
        assert np.array_equal(got, ens(eid, client, topic, receivers))   # the same draws every time


def test_dissemination_supersteps_give_the_one_process_delays_bit_for_bit(spark):
    ens = _ens()
    eid = np.array([0, 1, 2, -1, -1])
    client = np.array([1, 0, 3, 2, 2])
    topic = np.array([0, 1, 0, 0, 1])
    roots = np.array([ROOTS[t] for t in topic])
    starts = start_frame(spark, eid, topic, roots, ens.to_root(eid, client, topic))
    tree = spark.createDataFrame(EDGES.assign(edge_delay=EDGE_DELAY))
    got = disseminate(starts, tree, ens.jitter, ens.key, 2).toPandas()
    for e, c, t in zip(eid, client, topic):
        reached = got[(got.eid == e) & (got.topic == t)].set_index("node").delay
        assert set(reached.index) == set(EDGES[EDGES.topic == t].src) | {ROOTS[t]}
        on_clients = [i for i, n in enumerate(CLIENT_NODES) if n in reached.index]
        want = ens(int(e), int(c), int(t), on_clients)
        assert list(reached[CLIENT_NODES[on_clients]]) == list(want)     # exactly equal, not approx


def test_replay_of_one_subscriber_matches_its_ordering_layer_fed_directly():
    a, b, c = (Event(i, ((0, i + 1),), frozenset([0])) for i in range(3))
    arrivals = [(5.0, c), (1.0, a), (9.0, b)]
    sub = rp.replay(Subscriber(0, {0}), arrivals, None, [])
    assert [(e, t) for e, t, *_ in sub.log] == [(0, 1.0), (1, 9.0), (2, 9.0)]   # c waits for b
    late = rp.replay(Subscriber(0, {0}, ttl=2.0), arrivals, None, rp.tick_times(1.0, 20.0))
    assert [(e, t, o) for e, t, o, _ in late.log] == [(0, 1.0, False), (2, 7.0, True), (1, 9.0, True)]


def test_replay_recovers_a_lost_event_as_the_simulation_would():
    a, b, c = (Event(i, ((0, i + 1),), frozenset([0])) for i in range(3))
    # b's copy is lost: it reaches nobody, but the ENS would have brought it at 3.0
    slots = {(0, 1): (0.0, 0), (0, 2): (0.5, 1), (0, 3): (1.0, 2)}
    reach = {0: 1.0, 1: 3.0, 2: 5.0}

    def recovering(loss: float, key: int = 1) -> rp.Recovering:
        return rp.Recovering(Gaps(key, loss, 10.0, 100.0), Asking(lambda topic: 4.0), slots,
                             {0: a, 1: b, 2: c}, reach)
    got = recovering(0.0)
    sub = rp.replay(Subscriber(0, {0}), [(1.0, a), (5.0, c)], None, [], got)
    # c waits for slot (0, 2); 10 ms later its parent is asked, and b comes back one round trip later
    assert [(e, t) for e, t, *_ in sub.log] == [(0, 1.0), (1, 19.0), (2, 19.0)]
    assert (got.asking.messages, got.asking.recovered) == (2, 1)
    # a request lost (keyed draw): asked again after the timeout
    def draw(key: int, attempt: int, reply: int) -> float:      # (subscriber 0, slot (0, 2), attempt)
        return keyed_uniform(key, 0, 0, 2, attempt, reply)
    key = next(k for k in range(100) if draw(k, 1, 0) < 0.5 <= min(draw(k, 2, 0), draw(k, 2, 1)))
    again = recovering(0.5, key)
    sub = rp.replay(Subscriber(0, {0}), [(1.0, a), (5.0, c)], None, [], again)
    assert [(e, t) for e, t, *_ in sub.log] == [(0, 1.0), (1, 119.0), (2, 119.0)]
    assert (again.asking.messages, again.asking.recovered) == (3, 1)


@pytest.mark.slow
def test_spark_engine_gives_the_process_engines_table(tiny, tmp_path):
    conf = str(ROOT / "conf" / "tiny" / "tno_ordering.toml")
    assert cli.main("tno_ordering", ["--conf", conf, "--out", str(tmp_path), "--set", "engine=spark",
                                     "--set", 'chains=["etree"]']) == 0
    spark_rows = pd.read_csv(tmp_path / "tno_ordering" / "ordering.csv")
    process = pd.read_csv(tiny("tno_ordering") / "ordering.csv")
    process = process[process.chains == "etree"].reset_index(drop=True)
    # the five scenarios, then the loss sweep without and with gap recovery
    assert len(spark_rows) == 7 and spark_rows.notifications.min() > 0
    with_recovery = spark_rows[spark_rows.recovery].iloc[0]
    assert with_recovery.recovered > 0 and with_recovery.lost > 0 and with_recovery.sequencer_resends > 0
    assert spark_rows.to_csv() == process.to_csv()                        # every column, as written
