"""The timed engine's closed forms over down intervals (crash, then maybe back up, and down again), against
brute force: every keep-alive tick enumerated, every node's liveness asked one by one."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scribe_spark.pastry import timed
from scribe_spark.reference.closest import closest_live
from tests.helpers import small_ring

N, LEAF, UNTIL = 60, 8, 30_000.0
TM = timed.Timers(keepalive_ms=1000.0, failure_timeout_ms=700.0, rto_ms=400.0, proc_ms=1.5,
                  lookup_timeout_ms=20_000.0)


def _spans(rng: np.random.Generator) -> dict[int, list[tuple[float, float]]]:
    """A third of the nodes go down, half of those come back (some after the end), and half of those go
    down again, and so on: {node: its down intervals}."""
    spans = {}
    for v in rng.choice(N, N // 3, replace=False):
        t, spans[int(v)] = float(rng.uniform(0, UNTIL)), []
        while True:
            up = t + float(rng.uniform(10.0, 12_000.0)) if rng.random() < 0.5 else np.inf
            spans[int(v)].append((t, up))
            if up > UNTIL or rng.random() < 0.5:
                break
            t = up + float(rng.uniform(10.0, 8_000.0))
    return spans


def _downs(spans: dict[int, list[tuple[float, float]]]) -> timed.Downs:
    """The engine's table of those intervals."""
    return timed.Downs.of({v: [d for d, _ in s] for v, s in spans.items()},
                          {v: [u for _, u in s if u < np.inf] for v, s in spans.items()})


def _rows(rng: np.random.Generator, ring) -> pd.DataFrame:
    """Every (node, member) pair, each with a version interval: all time, or a random one."""
    members = timed.kernels.leaf_sets(ring, np.arange(N))
    n = N * LEAF
    t_from = np.where(rng.random(n) < 0.5, -np.inf, rng.uniform(0, UNTIL, n))
    t_to = np.where(rng.random(n) < 0.5, np.inf, t_from + rng.uniform(0, 15_000.0, n))
    return pd.DataFrame({"x": np.repeat(np.arange(N), LEAF), "y": np.concatenate(members), "j": np.tile(
        np.arange(LEAF), N), "t_from": t_from, "t_to": t_to})


def _ticks(spans: dict, x: int, t_from: float, t_to: float, seed: int) -> np.ndarray:
    """x's ticks in [t_from, t_to) before the end, none once x went down after t_from."""
    phase = timed.keepalive_phase(np.array([x]), seed, TM.keepalive_ms)[0]
    s = phase + np.arange(0, UNTIL // TM.keepalive_ms + 2) * TM.keepalive_ms
    stop = min([d for d, _ in spans.get(x, []) if d > t_from], default=np.inf)
    return s[(s >= t_from) & (s < min(t_to, UNTIL, stop))]


def _down_at(spans: dict, y: int, t: np.ndarray) -> np.ndarray:
    """Whether y is down at each time, from its intervals one by one."""
    return np.array([any(d <= ti < u for d, u in spans.get(y, [])) for ti in t], dtype=bool)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_failing_ticks_are_the_enumerated_ticks_whose_probe_finds_the_member_down(seed):
    """Per version and member: the ticks whose probe arrives while the member is down, from the first one to
    failure_timeout_ms after it, whose timeout falls before the end."""
    rng = np.random.default_rng(seed)
    spans = _spans(rng)
    ring, downs = small_ring(N, leaf=LEAF), _downs(spans)
    df = _rows(rng, ring)
    # as the engine asks: a row per member's down interval
    df = pd.DataFrame([(*r, d, u) for r in df.itertuples(index=False) for d, u in spans.get(r.y, [])],
                      columns=[*df.columns, "t_down", "t_up"])
    got = timed._failing_ticks(ring, downs, TM, seed, UNTIL, df)
    want = []
    for r in df.itertuples():
        s = _ticks(spans, r.x, r.t_from, r.t_to, seed)
        arrive = (s + float(ring.prox.dist([r.x], [r.y])[0])) + TM.proc_ms
        s = s[(arrive >= r.t_down) & (arrive < r.t_up)]
        s = s[(s <= s[0] + TM.failure_timeout_ms) & (s + TM.failure_timeout_ms < UNTIL)] if len(s) else s
        want += [(r.x, r.y, r.j, float(v) + TM.failure_timeout_ms, float(v)) for v in s]
    assert sorted(zip(got.node, got.other, got.ord, got.t, got.set_t)) == sorted(want)
    assert len(want) > 20 and (got.kind == timed.PROBE).all()
    assert any(s > spans[y][0][1] for _x, y, _j, _t, s in want)   # members down a second time


@pytest.mark.parametrize("width", [None, 700.0])
def test_probes_and_replies_are_the_enumerated_ones(width):
    """Per bin: every tick of a live node probes each member of its version, and a member up when the probe
    arrives, before the end, replies."""
    rng = np.random.default_rng(7)
    spans = _spans(rng)
    ring, downs = small_ring(N, leaf=LEAF), _downs(spans)
    df = _rows(rng, ring)
    bins = timed.Bins(UNTIL, width)
    got = timed._probes_answered(ring, downs, TM, 5, UNTIL, bins, df)
    sent, back = [], []
    for r in df.itertuples():
        s = _ticks(spans, r.x, r.t_from, r.t_to, 5)
        arrive = (s + float(ring.prox.dist([r.x], [r.y])[0])) + TM.proc_ms
        sent.append(s)
        back.append(arrive[~_down_at(spans, r.y, arrive) & (arrive < UNTIL)])
    want = [bins.count(np.concatenate(v)) for v in (sent, back)]
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert 0 < want[1].sum() < want[0].sum()


def test_requests_are_answered_by_nodes_up_when_they_arrive():
    """A request is answered iff its node is up at the arrival (down at its very time, up again at its
    very return), before the end."""
    ring = small_ring(N, leaf=LEAF)
    downs = timed.Downs.of({5: 100.0, 6: 100.0}, {6: 300.0})
    x, z = np.zeros(6, np.int64), np.array([5, 5, 6, 6, 6, 7])
    d = ring.prox.dist(x, z).astype(np.float64)
    t_a = np.array([99.0, 100.0, 100.0, 300.0, 299.0, 50.0])
    t = (t_a - TM.proc_ms) - d
    got_a, _t_r, replies = timed._request_times(ring, downs, TM, UNTIL, x, z, t)
    assert np.allclose(got_a, t_a)
    assert replies.tolist() == (~downs.is_down(z, got_a)).tolist()
    assert downs.is_down(z, t_a).tolist() == [False, True, True, False, True, False]


def test_the_closest_node_up_is_the_brute_force_one():
    """The numerically closest node up at each time, as brute force over the live ids at that time."""
    rng = np.random.default_rng(11)
    spans = _spans(rng)
    ring, downs = small_ring(N, leaf=LEAF), _downs(spans)
    keys = rng.integers(0, 2**63, (200, 2), dtype=np.int64).view(np.uint64)
    t = rng.uniform(0, UNTIL, 200)
    got = timed.closest_alive_at(ring, downs, keys[:, 0], keys[:, 1], t)
    live = [np.array([not _down_at(spans, v, [ti])[0] for v in range(N)]) for ti in t]
    want = [closest_live(ring, live[i], keys[i:i + 1, 0], keys[i:i + 1, 1])[0] for i in range(len(t))]
    assert got.tolist() == want


def test_down_intervals():
    """A node is down from its going at or before t until its return (exclusive), its incarnation counts
    returns, its ticks stop at its next going; it goes and comes back in turn."""
    downs = timed.Downs.of({3: [10.0, 70.0], 4: 20.0}, {3: [50.0, 90.0]})
    v = np.array([3, 3, 3, 3, 3, 3, 3, 4, 4, 9])
    t = np.array([9.0, 10.0, 49.0, 50.0, 69.0, 70.0, 90.0, 19.0, 1e9, 0.0])
    assert downs.is_down(v, t).tolist() == [False, True, True, False, False, True, False, False, True, False]
    assert downs.incarnation(v, t).tolist() == [0, 0, 0, 1, 1, 1, 2, 0, 0, 0]
    assert downs.cut(v, t).tolist() == [10.0, 70.0, 70.0, 70.0, 70.0, np.inf, np.inf, 20.0, np.inf, np.inf]
    place, down, up = downs.of_nodes(np.array([9, 4, 3]))
    assert list(zip(place.tolist(), down.tolist(), up.tolist())) == [(1, 20.0, np.inf), (2, 10.0, 50.0),
                                                                     (2, 70.0, 90.0)]
    # absent from the start (down since -inf) until 30, then down again at 60: its versions before its
    # return end where they begin, those after it at its next going
    absent = timed.Downs.of({6: [-np.inf, 60.0]}, {6: [30.0]})
    at = np.array([-np.inf, 0.0, 29.0, 30.0, 59.0, 60.0])
    assert absent.is_down(np.full(6, 6), at).tolist() == [True, True, True, False, False, True]
    assert absent.cut(np.full(6, 6), at).tolist() == [-np.inf, 0.0, 29.0, 60.0, 60.0, np.inf]
    assert timed.Downs.of({}).is_down(np.array([1]), np.array([0.0])).tolist() == [False]
    assert timed.Downs.of({}).cut(np.array([1]), np.array([0.0])).tolist() == [np.inf]
    for ups in ({5: 30.0}, {3: [30.0, 40.0]}):
        with pytest.raises(ValueError, match="comes back only after"):
            timed.Downs.of({3: 10.0}, ups)
    for ups in ({3: 10.0}, {3: 5.0}, {3: [70.0, 80.0]}):
        with pytest.raises(ValueError, match="in turn"):
            timed.Downs.of({3: [10.0, 60.0]}, ups)


def test_a_node_that_sent_at_its_return_went_nowhere_since():
    """A lookup sent at the very time its node came back waits `rto_ms` at it; at the timeout the engine
    asks whether the node went down since the send, whose time it recomputes as the timeout's less
    `rto_ms`: a rounding can put that a hair before the return, which a comparison of incarnations took
    for a going (the lookup was lost where the reference routes it on)."""
    back, rto = 32574.728195764055, 500.0
    timeout = back + rto
    assert timeout - rto < back   # the rounding this is about
    downs = timed.Downs.of({71: [15849.842624, 40_000.0]}, {71: [back]})
    v = np.array([71, 71, 71])
    since = np.array([timeout - rto, 35_000.0, 39_999.0])
    t = np.array([timeout, 39_000.0, 40_500.0])
    assert downs.went_since(v, since, t).tolist() == [False, False, True]
    assert downs.incarnation(v[:1], since[:1]).tolist() != downs.incarnation(v[:1], t[:1]).tolist()
