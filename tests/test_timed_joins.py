"""Pastry's join in simulated time, in the sequential reference, against brute force."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from scribe_spark import ids
from scribe_spark.reference.timed_pastry import TimedPastry
from tests.helpers import closest_brute, node_ints
from tests.test_timed_pastry import PARAMS, live_leaf_sets, matrix_setup, random_lookups


def _valid_table(ring, x: int, rt: list[int]) -> bool:
    """Every entry shares its row's digits with x and has the column's digit next."""
    cols = 1 << ring.b
    for slot, e in enumerate(rt):
        if e >= 0:
            hi, lo = ring.hi[[x, e]], ring.lo[[x, e]]
            r = int(ids.shared_prefix_digits(hi[:1], lo[:1], hi[1:], lo[1:], ring.b)[0])
            if r != slot // cols or int(ids.digit(ring.hi[[e]], ring.lo[[e]], r, ring.b)[0]) != slot % cols:
                return False
    return True


def test_newcomers_joining_a_quiet_overlay_end_with_the_whole_rings_leaf_sets():
    """50 newcomers join 150 members over 8 s; by 40 s every leaf set is the whole ring's, every newcomer's
    table is valid and has its first row, and lookups from anyone reach the closest node."""
    ring, link, phase = matrix_setup(200, 8, seed=7)
    rng = np.random.default_rng(7)
    new = np.sort(rng.choice(ring.n, 50, replace=False))
    at = {int(v): float(t) for v, t in zip(new, rng.uniform(0.0, 8000.0, len(new)))}
    lookups = random_lookups(rng, ring.n, 150, 20_000.0, 35_000.0)
    res = TimedPastry(ring, link, PARAMS, phase, new).run(
        {v: -math.inf for v in at}, lookups, 40_000.0, recoveries=at, newcomers=set(at))
    assert sorted(v for v, _t in res.joined) == sorted(at) and not res.joins_lost
    want = live_leaf_sets(ring, set())
    assert [v for v in range(ring.n) if res.leaf[v] != want[v]] == []
    ints = node_ints(ring)
    for look, (_t, _s, khi, klo) in zip(res.lookups, lookups):
        assert look["outcome"] == "correct" and look["dest"] == closest_brute(ints, (khi << 64) | klo)
    assert res.messages["join"] >= 50 and res.messages["join_reply"] >= 50
    assert res.messages["join_announce"] > 50 * 8


def test_a_newcomer_builds_its_state_from_its_route():
    """One newcomer in a quiet overlay: right after its state is built, its leaf set is the ring's (the
    route ends at the node numerically closest), its table valid with the nearest candidates the route
    offered in row 0 (the contact's row 0 and the contact); its leaf set's members take it into theirs."""
    ring, link, phase = matrix_setup(120, 8, seed=8)
    x = 17
    sim = TimedPastry(ring, link, PARAMS, phase, [x])
    first = sim.run({x: -math.inf}, [], 5000.0, recoveries={x: 1000.0}, newcomers={x})
    (v, built), = first.joined
    assert v == x and built > 1000.0
    members = [u for u in range(ring.n) if u != x]
    contact = min(members, key=lambda u: (link(x, u), u))
    contact_rt = list(TimedPastry(ring, link, PARAMS, phase, [x]).node_state(contact)[1])
    sim.run({x: -math.inf}, [], built + 1e-6, recoveries={x: 1000.0}, newcomers={x})
    leaf, rt, nbr, _dead = sim.node_state(x)
    assert leaf == live_leaf_sets(ring, set())[x] and _valid_table(ring, x, rt)
    cols = 1 << ring.b
    offered = [contact] + [e for e in contact_rt[:cols] if e >= 0]
    for c in range(cols):
        fit = [u for u in offered if sim._slot_for(x, u) == c]
        assert rt[c] == (min(fit, key=lambda u: (link(x, u), u)) if fit else -1)
    assert nbr == []
    later = TimedPastry(ring, link, PARAMS, phase, [x])
    later.run({x: -math.inf}, [], built + 500.0, recoveries={x: 1000.0}, newcomers={x})
    assert all(x in later.node_state(u)[0] for u in leaf)   # its leaf set's members took it in theirs
    assert any(x in later.node_state(u)[1] for u in range(ring.n) if u != x)   # and some their tables


@pytest.mark.parametrize("seed, tried_again", [(9, 0), (11, 1)])
def test_joins_amid_crashes_end_with_the_live_rings_leaf_sets(seed, tried_again):
    """30 newcomers join while 12 members crash: JOINs meet dead nodes and are routed around them (with
    seed 11 a forwarder dies holding one, and its newcomer tries again after the lookup timeout); by 40 s
    every live node's leaf set is the live ring's and every lookup reaches the closest live node."""
    ring, link, phase = matrix_setup(160, 8, seed=seed)
    rng = np.random.default_rng(seed)
    new, dead = np.split(rng.choice(ring.n, 42, replace=False), [30])
    at = {int(v): float(t) for v, t in zip(new, rng.uniform(0.0, 8000.0, len(new)))}
    crashes = {**{v: -math.inf for v in at},
               **{int(v): float(t) for v, t in zip(dead, rng.uniform(0.0, 8000.0, len(dead)))}}
    lookups = random_lookups(rng, ring.n, 100, 25_000.0, 35_000.0)
    params = dataclasses.replace(PARAMS, lookup_timeout_ms=5000.0)
    res = TimedPastry(ring, link, params, phase, np.sort(new)).run(crashes, lookups, 40_000.0, recoveries=at,
                                                                   newcomers=set(at))
    assert sorted(v for v, _t in res.joined) == sorted(at) and len(res.joins_lost) == tried_again
    assert {u for _x, u, _v, _t in res.join_timeouts} - set(at)   # members routed JOINs around the dead
    want = live_leaf_sets(ring, set(dead.tolist()))
    assert [v for v in want if res.leaf[v] != want[v]] == []
    issued = [look["outcome"] for look in res.lookups if look["outcome"] != "not_issued"]
    assert issued == ["correct"] * len(issued) and len(issued) > 70


def test_a_newcomer_down_before_its_state_is_built_joins_again_when_back():
    """A newcomer that crashes before its replies are in comes back as a newcomer again: it joins anew (a
    second JOIN), ends with its leaf set, and its leaf set's members hold it."""
    ring, link, phase = matrix_setup(120, 8, seed=12)
    x = 33
    res = TimedPastry(ring, link, PARAMS, phase, [x]).run({x: [-math.inf, 1000.5]}, [], 20_000.0,
                                                          recoveries={x: [1000.0, 3000.0]}, newcomers={x})
    assert [v for v, _t in res.joined] == [x] and res.joined[0][1] > 3000.0
    assert res.messages["join"] >= 2 and res.leaf[x] == live_leaf_sets(ring, set())[x]
    assert all(x in res.leaf[u] for u in res.leaf[x])
