"""The sequential timed Pastry (keep-alives, failure detection, leaf-set repair, lookups) by closed forms."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from scribe_spark.pastry import kernels
from scribe_spark.reference.timed_pastry import TimedParams, TimedPastry
from tests.helpers import small_ring

T_KA, T_FD, RTO, PROC = 1000.0, 1000.0, 500.0, 1.0   # matrix links are under 100 ms: T_fd >> a round trip
PARAMS = TimedParams(keepalive_ms=T_KA, failure_timeout_ms=T_FD, rto_ms=RTO, proc_ms=PROC,
                     lookup_timeout_ms=20_000.0)


def matrix_setup(n: int, leaf: int, seed: int = 1):
    """A matrix-model ring, its link delays (ms) and random keep-alive phases."""
    ring = small_ring(n, model="matrix", leaf=leaf, seed=seed)

    def link(u: int, v: int) -> float:
        return float(ring.prox.dist([u], [v])[0])
    phase = np.random.default_rng(seed + 100).uniform(0.0, T_KA, n)
    return ring, link, phase


def converged(ring) -> list[tuple[list[int], list[int], list[int]]]:
    """Every node's converged (leaf, rt, nbr) straight from the kernels."""
    nodes = np.arange(ring.n)
    return [(a.tolist(), b.tolist(), c.tolist()) for a, b, c in
            zip(kernels.leaf_sets(ring, nodes), kernels.routing_tables(ring, nodes),
                kernels.neighborhood_sets(ring, nodes))]


def static_path(ring, state, src: int, khi: int, klo: int) -> list[int]:
    """The nodes a lookup visits on the unchanging converged state, by route_step hop by hop."""
    path, kh, kl = [src], np.array([khi], dtype=np.uint64), np.array([klo], dtype=np.uint64)
    for _ in range(ring.route_bound):
        leaf, rt, nbr = state[path[-1]]
        arrs = [x for vals in (leaf, rt, nbr) for x in (np.asarray(vals, dtype=np.int64),
                                                       np.array([0, len(vals)]))]
        nxt, rule = kernels.route_step(ring, kh, kl, np.array([path[-1]]), *arrs)
        if rule[0] == kernels.DELIVERED:
            return path
        path.append(int(nxt[0]))
    raise AssertionError("route did not end")


def live_leaf_sets(ring, dead: set[int]) -> dict[int, list[int]]:
    """Brute force: each live node's converged leaf set on the ring without `dead` (L/2 before, L/2 after)."""
    live = [int(v) for v in ring.order if int(v) not in dead]   # ring order
    half, m = ring.leaf_set // 2, len(live)
    near = range(1, half + 1)
    return {v: [live[(i - j) % m] for j in near] + [live[(i + j) % m] for j in near]
            for i, v in enumerate(live)}


def random_lookups(rng, n: int, count: int, t0: float, t1: float) -> list[tuple[float, int, int, int]]:
    """`count` lookups of random keys from random sources at random times in [t0, t1)."""
    keys = rng.integers(0, 2**64, size=(count, 2), dtype=np.uint64)
    times = np.sort(rng.uniform(t0, t1, count))
    srcs = rng.integers(0, n, count)
    return [(float(t), int(s), int(h), int(lo)) for t, s, (h, lo) in zip(times, srcs, keys)]


def test_no_crashes_latencies_and_probe_counts():
    """No crashes: lookups take their static routes; probes and replies as counted from the phases."""
    ring, link, phase = matrix_setup(120, 8)
    state = converged(ring)
    lookups = random_lookups(np.random.default_rng(5), ring.n, 150, 0.0, 4000.0)
    until = 5000.0
    res = TimedPastry(ring, link, PARAMS, phase).run({}, lookups, until)
    for look, (t, src, khi, klo) in zip(res.lookups, lookups):
        path = static_path(ring, state, src, khi, klo)
        assert look["outcome"] == "correct" and look["dest"] == path[-1]
        assert look["hops"] == len(path) - 1 and look["timeouts"] == 0
        assert look["latency_ms"] == pytest.approx(sum(link(u, v) + PROC for u, v in zip(path, path[1:])),
                                                   rel=1e-12, abs=1e-9)
    # probes: every tick before `until` probes the L members; a reply is sent when its probe's arrival is
    # processed, i.e. before `until`
    probes = replies = 0
    for x in range(ring.n):
        ticks = [phase[x] + k * T_KA for k in range(math.ceil((until - phase[x]) / T_KA))]
        assert all(t < until for t in ticks) and ticks[-1] + T_KA >= until
        probes += len(ticks) * len(state[x][0])
        replies += sum(t + link(x, y) + PROC < until for t in ticks for y in state[x][0])
    assert res.messages["probe"] == probes and res.messages["probe_reply"] == replies
    assert replies < probes   # the last ticks' probes are still flying at the end
    assert res.messages["lookup"] == sum(look["hops"] for look in res.lookups)
    assert res.detections == [] and res.repairs == [] and res.messages["leaf_request"] == 0
    assert res.leaf == [row for row, _, _ in state]


def test_detection_times_in_closed_form():
    """A crashed node's leaf-set members detect it T_fd after their first probes to arrive past the crash."""
    ring, link, phase = matrix_setup(120, 8)
    y, t_c = 17, 2345.678
    members = kernels.leaf_sets(ring, np.array([y]))[0].tolist()
    res = TimedPastry(ring, link, PARAMS, phase).run({y: t_c}, [], 6000.0)
    expected = {}
    for x in members:   # x's first tick whose probe reaches y at or after t_c
        d = link(x, y) + PROC
        k = max(0, math.ceil((t_c - d - phase[x]) / T_KA))
        assert phase[x] + k * T_KA + d >= t_c and (k == 0 or phase[x] + (k - 1) * T_KA + d < t_c)
        expected[x] = phase[x] + k * T_KA + T_FD
    assert {x: t for f, x, _, t in res.detections} == expected
    assert all(f == y and tc == t_c for f, _, tc, _ in res.detections)
    assert len(res.detections) == len(members)
    # each detector repairs once, after its detection
    assert sorted(x for x, _ in res.repairs) == sorted(members)
    assert all(t > expected[x] for x, t in res.repairs)


def test_a_graceful_leave_is_declared_as_each_notice_arrives():
    """A leaving node tells its leaf set: each member declares it on the notice's arrival, no probe
    times out on it, and the leaf sets converge as after a crash."""
    ring = small_ring(200, model="matrix", leaf=16, seed=2)
    phase = np.random.default_rng(7).uniform(0.0, T_KA, ring.n)
    y, t_l = 123, 1500.0
    sim = TimedPastry(ring, lambda u, v: 20.0, PARAMS, phase)
    res = sim.run({}, [], t_l + 2 * T_KA + 2 * T_FD, leaves={y: t_l})
    members = kernels.leaf_sets(ring, np.array([y]))[0].tolist()
    assert sorted((f, x, tc, t) for f, x, tc, t in res.detections) == \
        sorted((y, x, t_l, t_l + 20.0 + PROC) for x in members)
    assert res.messages["leave"] == len(members) and res.sent_at["leave"] == [t_l] * len(members)
    want = live_leaf_sets(ring, {y})
    assert {x: sim.leaf_sets()[x] for x in want} == want
    with pytest.raises(ValueError, match="in turn"):
        sim.run({y: 1.0}, [], 10.0, leaves={y: 2.0})


def test_leaf_sets_converge_after_one_crash():
    """After one crash the live nodes' leaf sets are those of the ring without it."""
    ring = small_ring(200, model="matrix", leaf=16, seed=2)
    phase = np.random.default_rng(7).uniform(0.0, T_KA, ring.n)
    y = 123
    sim = TimedPastry(ring, lambda u, v: 20.0, PARAMS, phase)
    res = sim.run({y: 1500.0}, [], 1500.0 + 2 * T_KA + 2 * T_FD)
    want = live_leaf_sets(ring, {y})
    got = sim.leaf_sets()
    assert {x: got[x] for x in want} == want
    assert got[y] == kernels.leaf_sets(ring, np.array([y]))[0].tolist()   # a dead node's state stays
    assert len(res.repairs) == ring.leaf_set and res.messages["leaf_reply"] == ring.leaf_set
    assert all(y in sim.node_state(x)[3] for x in kernels.leaf_sets(ring, np.array([y]))[0])


def through(ring, state, y: int, rng, want: int) -> list[tuple[int, int, int]]:
    """(src, key) pairs whose static route passes y without ending there, then ones ending at y."""
    mid = []
    while len(mid) < want:
        src, (khi, klo) = int(rng.integers(ring.n)), rng.integers(0, 2**64, size=2, dtype=np.uint64)
        if src != y and y in static_path(ring, state, src, int(khi), int(klo))[1:-1]:
            mid.append((src, int(khi), int(klo)))
    yk = (int(ring.hi[y]), int(ring.lo[y]))
    far = [s for s in range(ring.n) if len(static_path(ring, state, s, *yk)) >= 3]
    return mid + [(s, *yk) for s in far[:want]]


def test_lookup_through_crashed_node_times_out_and_is_correct():
    """A route through a fresh crash times out and still ends right; after the repairs all lookups do."""
    ring, link, phase = matrix_setup(120, 8, seed=3)
    state = converged(ring)
    sim = TimedPastry(ring, link, PARAMS, phase)
    y, t_c = 40, 3000.0
    # issued 1 ms after the crash: no node detects y before t_c - (100 + PROC) + T_FD, long after the
    # lookup has reached y's predecessor on its route; one run per lookup, so no other lookup warns it
    for src, khi, klo in through(ring, state, y, np.random.default_rng(11), 2):
        res = sim.run({y: t_c}, [(t_c + 1.0, src, khi, klo)], t_c + 3000.0)
        look = res.lookups[0]
        assert look["timeouts"] >= 1 and look["outcome"] == "correct" and look["dest"] != y
        assert res.messages["lookup"] == look["hops"] + look["timeouts"]
    # after every repair, any lookup is correct
    late = random_lookups(np.random.default_rng(12), ring.n, 150, t_c + 3 * T_KA, t_c + 5 * T_KA)
    late = [lk for lk in late if lk[1] != y]
    res = sim.run({y: t_c}, late, t_c + 6 * T_KA)
    assert len(res.repairs) == ring.leaf_set and max(t for _, t in res.repairs) < late[0][0]
    assert [look["outcome"] for look in res.lookups] == ["correct"] * len(late)


def test_several_crashes_settle_deterministically():
    """5% crashes: lookups right once repaired, runs repeatable, message counts agree with the logs."""
    ring, link, phase = matrix_setup(240, 16, seed=4)
    rng = np.random.default_rng(21)
    dead = rng.choice(ring.n, ring.n // 20, replace=False)
    crashes = {int(v): float(t) for v, t in zip(dead, rng.uniform(500.0, 4000.0, len(dead)))}
    lookups = random_lookups(rng, ring.n, 400, 0.0, 11_000.0)
    until = 12_000.0
    sim = TimedPastry(ring, link, PARAMS, phase)
    res = sim.run(crashes, lookups, until)
    assert TimedPastry(ring, link, PARAMS, phase).run(crashes, lookups, until) == res
    # no false detections: every one names a crashed node, after its crash
    assert all(f in crashes and tc == crashes[f] and td > tc for f, _, tc, td in res.detections)
    assert {f for f, *_ in res.detections} == set(crashes)
    # once every detector has repaired (routes still find dead routing-table entries later on)
    settled = max(t for _, t in res.repairs)
    after = [look for look in res.lookups if look["t_issue"] > settled and look["src"] not in crashes]
    assert len(after) > 50
    assert all(look["outcome"] == "correct" for look in after)
    assert all(look["outcome"] in ("correct", "not_issued") for look in res.lookups)
    assert sum(look["outcome"] == "not_issued" for look in res.lookups) == \
        sum(crashes.get(s, math.inf) <= t for t, s, _, _ in lookups)
    # every live node ends with the converged leaf set of the live ring
    want = live_leaf_sets(ring, set(crashes))
    assert {x for x in want if res.leaf[x] != want[x]} == set()
    # the message log agrees with the event logs
    assert res.messages["leaf_request"] == len(res.repair_starts) > 0
    assert res.messages["leaf_reply"] == len(res.repairs)   # no requester crashed waiting for its reply
    # a request goes unanswered exactly when the node asked is dead on its arrival (adjacent crashes)
    unanswered = sum(crashes.get(z, math.inf) <= t + link(x, z) + PROC for x, _, z, t in res.repair_starts)
    assert res.messages["leaf_request"] - res.messages["leaf_reply"] == unanswered > 0
    assert res.messages["lookup"] == sum(look["hops"] + look["timeouts"] for look in res.lookups)
    assert sum(look["timeouts"] for look in res.lookups) > 0
    assert res.messages["probe_reply"] < res.messages["probe"]


def test_repair_merge_matches_kernel_layout():
    """With every node a candidate, the merge gives the kernels' converged leaf sets."""
    ring, link, phase = matrix_setup(60, 8)
    sim = TimedPastry(ring, link, PARAMS, phase)
    for x, row in enumerate(kernels.leaf_sets(ring, np.arange(ring.n))):
        pred, succ = sim.nearest_sides(x, set(range(ring.n)) - {x})
        assert pred + succ == row.tolist()


def test_equal_times_follow_priorities():
    """Crash before message before timer: exact ties, with integer-valued delays (10 + 1 ms a message)."""
    ring = small_ring(60, model="matrix", leaf=8)
    hop = 10.0 + PROC

    def sim(t_fd: float, phase: float) -> TimedPastry:
        params = TimedParams(keepalive_ms=1000.0, failure_timeout_ms=t_fd, rto_ms=RTO, proc_ms=PROC,
                             lookup_timeout_ms=5000.0)
        return TimedPastry(ring, lambda u, v: 10.0, params, np.full(ring.n, phase))
    # a reply arriving at its probe's timer is in time; a hair later it is not
    assert sim(2 * hop, 0.0).run({}, [], 900.0).detections == []
    late = sim(2 * hop - 1e-6, 0.0).run({}, [], 900.0).detections
    first = [t for *_, t in late if t == 2 * hop - 1e-6]   # later ones: timed-out table repairs they began
    assert len(first) == ring.n * ring.leaf_set and min(t for *_, t in late) == 2 * hop - 1e-6
    # a probe arriving at its target's crash time finds it dead
    y = 7
    got = sim(100.0, 0.0).run({y: hop}, [], 900.0).detections
    assert sorted(x for f, x, _, t in got if t == 100.0) == sorted(kernels.leaf_sets(ring, np.array([y]))[0])
    assert sim(100.0, 0.0).run({y: hop + 1e-9}, [], 900.0).detections == []
    # a lookup arriving at its next node's crash time times out there and goes to the next closest
    src = int(ring.order[(ring.pos[y] - 1) % ring.n])   # y's predecessor: one hop by the leaf set
    key = (int(ring.hi[y]), int(ring.lo[y]))
    for t_c, timeouts in ((100.0 + hop, 1), (100.0 + hop + 1e-9, 0)):
        look = sim(100.0, 500.0).run({y: t_c}, [(100.0, src, *key)], 900.0).lookups[0]
        assert look["outcome"] == "correct" and look["timeouts"] == timeouts
        assert (look["dest"] == y) == (timeouts == 0)


def test_merge_rule_puts_each_candidate_on_its_nearer_side():
    """Lopsided candidates (two near successors, many predecessors): the successor side keeps only the
    two, never predecessors from past the half ring, which would make a full-looking but wrong side."""
    ring, link, phase = matrix_setup(60, 8)
    sim = TimedPastry(ring, link, PARAMS, phase)
    x, p = 5, int(ring.pos[5])
    at = [int(ring.order[(p + d) % ring.n]) for d in range(ring.n)]   # at[d]: d places clockwise from x
    pred, succ = sim.nearest_sides(x, {at[1], at[2]} | {at[-d] for d in range(1, 11)})
    assert succ == [at[1], at[2]]
    assert pred == [at[-1], at[-2], at[-3], at[-4]]


def test_bad_inputs():
    """Phases out of range, rings of L nodes or fewer, and non-positive timings are refused."""
    ring, link, phase = matrix_setup(60, 8)
    with pytest.raises(ValueError):
        TimedPastry(ring, link, PARAMS, phase + T_KA)
    with pytest.raises(ValueError):
        TimedPastry(small_ring(8, model="matrix", leaf=8), link, PARAMS, phase[:8])
    with pytest.raises(ValueError):
        TimedParams(keepalive_ms=0.0, failure_timeout_ms=1.0, rto_ms=1.0, proc_ms=0.0, lookup_timeout_ms=1.0)


def test_a_dead_table_entry_is_refilled_from_the_nearest_entries_of_its_row():
    """A lookup meets a crashed routing-table entry: the forwarder asks its row's entries nearest first,
    each for its own entry at that slot, and takes the first live node named, one that fits the slot."""
    ring, link, phase = matrix_setup(240, 8, seed=5)
    state = converged(ring)
    cols = 1 << ring.b
    # x holds y in row 0 (not in its leaf set), and y is the first hop of x's static route to y's id
    x, y = next((x, y) for x in range(ring.n) for y in state[x][1][:cols]
                if y >= 0 and y not in state[x][0] and static_path(ring, state, x, int(ring.hi[y]),
                                                                    int(ring.lo[y]))[1] == y)
    s = state[x][1].index(y)
    t_c = 100.0
    sim = TimedPastry(ring, link, PARAMS, phase)
    res = sim.run({y: t_c}, [(t_c + 1.0, x, int(ring.hi[y]), int(ring.lo[y]))], t_c + 2000.0)
    asks = [(w, t) for node, slot, w, t in res.table_asks if node == x and slot == s]
    row = [e for e in state[x][1][:cols] if e >= 0 and e != y]
    # asked in order of link delay from x, among the row's live entries (y's neighbours learn late)
    assert [w for w, _ in asks] == sorted(row, key=lambda e: (link(x, e), e))[:len(asks)] and asks
    filled = [(e, t) for node, slot, e, t in res.table_repairs if node == x and slot == s]
    # the first asked node whose converged entry at s is live and not y gives it
    named = [state[w][1][s] if s < len(state[w][1]) else -1 for w, _ in asks]
    assert all(e in (-1, y) for e in named[:-1]) and len(filled) == 1 and filled[0][0] == named[-1]
    e = filled[0][0]
    assert kernels.table_slot(ring, ring.hi[[e]], ring.lo[[e]], [x])[1][0] == s and e != y
    assert res.messages["table_request"] == len(res.table_asks) >= len(asks)
    assert res.messages["table_reply"] <= res.messages["table_request"]
    _leaf, rt, _nbr, dead = sim.node_state(x)   # at the end of the run
    assert rt[s] == e and y in dead and res.lookups[0]["outcome"] == "correct"
    # without table repair the entry stays empty and no table message is sent
    off = TimedPastry(ring, link, dataclasses.replace(PARAMS, table_repair=False), phase)
    res = off.run({y: t_c}, [(t_c + 1.0, x, int(ring.hi[y]), int(ring.lo[y]))], t_c + 2000.0)
    assert off.node_state(x)[1][s] == -1 and not res.table_asks and res.messages["table_request"] == 0


def test_a_recovered_node_is_back_in_every_leaf_set_and_takes_its_keys_again():
    """A node that crashes and comes back asks its last leaf set: after the replies and notices, every
    leaf set is the converged one again, no one knows it dead, and lookups of its keys reach it."""
    ring = small_ring(200, model="matrix", leaf=16, seed=2)
    phase = np.random.default_rng(7).uniform(0.0, T_KA, ring.n)
    y, t_c, t_r = 123, 1500.0, 1500.0 + 3 * T_KA   # down long enough for every member to declare it
    sim = TimedPastry(ring, lambda u, v: 20.0, PARAMS, phase)
    state = converged(ring)
    khi, klo = int(ring.hi[y]), int(ring.lo[y])
    looks = [(t_r - 10.0, 7, khi, klo), (t_r + 2 * T_FD, 7, khi, klo)]
    res = sim.run({y: t_c}, looks, t_r + 2 * T_KA + 2 * T_FD, recoveries={y: t_r})
    members = state[y][0]
    assert sorted(x for f, x, _, _ in res.detections if f == y) == sorted(members)
    assert res.messages["rejoin"] == len(members) and res.messages["rejoin_reply"] == len(members)
    assert res.sent_at["rejoin"] == [t_r] * len(members)
    assert len(res.repairs) == len(members)   # the members' repairs after the crash; rejoins are none
    assert sim.leaf_sets() == [row for row, _, _ in state]
    assert not any(y in sim.node_state(x)[3] for x in range(ring.n))
    before, after = res.lookups
    assert before["dest"] != y and after["outcome"] == "correct" and after["dest"] == y


def test_timers_and_replies_of_a_nodes_life_before_a_crash_do_nothing_after_it_recovers():
    """x crashes just after probing its leaf set and is back before the probes' timers: the replies
    came while it was down, yet it declares no one failed; it ticks again from its next tick on."""
    ring = small_ring(200, model="matrix", leaf=16, seed=2)
    phase = np.random.default_rng(7).uniform(0.0, T_KA, ring.n)
    x = 45
    t_tick = float(phase[x]) + 2 * T_KA
    t_c, t_r = t_tick + 1.0, t_tick + 100.0      # the replies (20 ms each way) arrive while x is down
    sim = TimedPastry(ring, lambda u, v: 20.0, PARAMS, phase)
    until = t_tick + 3 * T_KA
    res = sim.run({x: t_c}, [], until, recoveries={x: t_r})
    assert [d for d in res.detections if d[1] == x] == []
    assert not any(f == x for f, _, _, _ in res.detections)    # nobody probed it while it was down
    ticks_x = [t for t in res.sent_at["probe"] if t in {float(phase[x]) + k * T_KA for k in range(6)}]
    assert sorted(set(ticks_x)) == [float(phase[x]) + k * T_KA for k in range(5)]
    assert sim.leaf_sets()[x] == converged(ring)[x][0]


def test_a_recovering_node_declares_the_members_that_do_not_answer():
    """A member of the recovered node's last leaf set that is down gets no rejoin through: the node
    declares it failed T_fd after asking, and its leaf set ends as on the ring without that member."""
    ring = small_ring(200, model="matrix", leaf=16, seed=2)
    phase = np.random.default_rng(7).uniform(0.0, T_KA, ring.n)
    y = 123
    z = converged(ring)[y][0][0]
    t_r = 1500.0 + 3 * T_KA
    sim = TimedPastry(ring, lambda u, v: 20.0, PARAMS, phase)
    res = sim.run({y: 1500.0, z: 1400.0}, [], t_r + 3 * T_KA + 2 * T_FD, recoveries={y: t_r})
    assert (z, y, 1400.0, t_r + T_FD) in res.detections
    want = live_leaf_sets(ring, {z})
    assert {v: sim.leaf_sets()[v] for v in want} == want
    with pytest.raises(ValueError, match="comes back only after it went down"):
        sim.run({}, [], 10.0, recoveries={y: 5.0})
    with pytest.raises(ValueError, match="in turn"):
        sim.run({y: 5.0}, [], 10.0, recoveries={y: 5.0})


def test_after_crashes_leaves_and_recoveries_the_leaf_sets_are_those_of_the_live_ring():
    """Thirty crashes and ten leaves, twenty-five of them followed by a recovery, at random times: long
    after the last one every live node's leaf set is its converged one among the live nodes, and every
    lookup issued then ends at the right node."""
    ring = small_ring(200, model="matrix", leaf=16, seed=2)
    rng = np.random.default_rng(4)
    phase = rng.uniform(0.0, T_KA, ring.n)
    down = rng.choice(ring.n, 40, replace=False)
    crashes = {int(v): float(rng.uniform(0, 20_000)) for v in down[:30]}
    leaves = {int(v): float(rng.uniform(0, 20_000)) for v in down[30:]}
    back = {v: t + float(rng.uniform(100, 10_000)) for v, t in list({**crashes, **leaves}.items())[:25]}
    looks = random_lookups(rng, ring.n, 100, 45_000.0, 50_000.0)

    def link(u: int, v: int) -> float:
        return float(ring.prox.dist([u], [v])[0])
    sim = TimedPastry(ring, link, PARAMS, phase)
    res = sim.run(crashes, looks, 55_000.0, leaves=leaves, recoveries=back)
    dead = (set(crashes) | set(leaves)) - set(back)
    want = live_leaf_sets(ring, dead)
    assert {x: sim.leaf_sets()[x] for x in want} == want
    assert res.messages["rejoin"] > 0 and res.messages["announce"] > 0
    assert {look["outcome"] for look in res.lookups} <= {"correct", "not_issued"}
    assert sum(look["outcome"] == "correct" for look in res.lookups) > 80


def test_a_request_or_lookup_to_a_node_that_said_it_is_back_is_sent_again_not_declared():
    """x asks z for its leaf set while z is down; z is back and tells x before x's timer: x asks again
    and its repair lands. u sends a lookup to y while y is down; y is back and tells u before the
    retransmission timer: u declares nothing and the lookup reaches y. Leaf sets end as the live ring's."""
    ring = small_ring(200, model="matrix", leaf=16, seed=2)
    phase = np.random.default_rng(7).uniform(0.0, T_KA, ring.n)
    sim = TimedPastry(ring, lambda a, b: 20.0, PARAMS, phase)
    x = 45
    leaf = converged(ring)[x][0]
    y, z, t_c = leaf[8], leaf[15], 1500.0   # x's nearest successor crashes for good; x asks its farthest
    first = sim.run({y: t_c}, [], t_c + 3 * T_KA + T_FD)
    t_d = next(t for f, d, _, t in first.detections if f == y and d == x)
    res = sim.run({y: t_c, z: t_d - 50.0}, [], 30_000.0, recoveries={z: t_d + 300.0})
    assert [v for v, _ in res.repairs].count(x) == 1
    assert (z, x) not in {(f, d) for f, d, _, _ in res.detections}
    want = live_leaf_sets(ring, {y})
    assert {v: sim.leaf_sets()[v] for v in want} == want

    y = 123
    u = converged(ring)[y][0][0]
    khi, klo = int(ring.hi[y]), int(ring.lo[y])
    # down 300 ms; the lookup arrives while y is down, its rto timer fires after y's rejoin reached u
    looks = [(5100.0, u, khi, klo)] + [(30_000.0 + i, u, khi, klo) for i in range(3)]
    res = sim.run({y: 5000.0}, looks, 40_000.0, recoveries={y: 5300.0})
    assert not any(f == y for f, _, _, _ in res.detections)
    assert [(look["outcome"], look["dest"]) for look in res.lookups] == [("correct", y)] * 4
    assert res.lookups[0]["timeouts"] == 1


def test_nodes_absent_from_the_start_are_as_if_not_in_the_ring():
    """Absent nodes that never come back: the run equals, renumbered, the run on the ring of the others."""
    ring, link, phase = matrix_setup(150, 8, seed=3)
    rng = np.random.default_rng(3)
    absent = np.sort(rng.choice(ring.n, 40, replace=False))
    members = np.setdiff1d(np.arange(ring.n), absent)
    lookups = [lk for lk in random_lookups(rng, ring.n, 200, 0.0, 8000.0) if lk[1] in set(members.tolist())]
    crash = {int(members[5]): 2500.0, int(members[60]): 4100.0}
    until = 9000.0
    res = TimedPastry(ring, link, PARAMS, phase, absent).run(
        {**crash, **{int(v): -math.inf for v in absent}}, lookups, until)
    sub, local = kernels.members_ring(ring, members), {int(v): i for i, v in enumerate(members)}
    alone = TimedPastry(sub, lambda u, v: link(int(members[u]), int(members[v])), PARAMS,
                        phase[members]).run({local[v]: t for v, t in crash.items()},
                                            [(t, local[s], h, lo) for t, s, h, lo in lookups], until)
    assert [lk["outcome"] for lk in res.lookups] == [lk["outcome"] for lk in alone.lookups]
    assert [lk["dest"] for lk in res.lookups] == [int(members[d]) if (d := lk["dest"]) >= 0 else d
                                                  for lk in alone.lookups]
    assert [lk["latency_ms"] for lk in res.lookups] == [lk["latency_ms"] for lk in alone.lookups]
    assert res.messages == alone.messages and sum(res.messages.values()) > 0
    assert sorted(res.detections) == sorted((int(members[y]), int(members[x]), c, t)
                                            for y, x, c, t in alone.detections)
    assert len(res.detections) > 0 and not set(absent.tolist()) & {y for y, *_ in res.detections}
    with pytest.raises(ValueError, match="absent nodes go down at -inf"):
        TimedPastry(ring, link, PARAMS, phase, absent).run(crash, lookups, until)


def test_nodes_absent_from_the_start_come_back_into_the_leaf_sets():
    """Absent nodes coming back rejoin through the leaf sets they had with every node in: at the end every
    leaf set is the whole ring's (nobody else goes down)."""
    ring, link, phase = matrix_setup(150, 8, seed=4)
    rng = np.random.default_rng(4)
    absent = np.sort(rng.choice(ring.n, 45, replace=False))
    back = {int(v): float(t) for v, t in zip(absent, rng.uniform(0.0, 5000.0, len(absent)))}
    sim = TimedPastry(ring, link, PARAMS, phase, absent)
    start = [list(leaf) for leaf in sim.leaf_sets()]
    assert all(not set(start[x]) & set(absent.tolist()) for x in range(ring.n) if x not in back)
    res = sim.run({v: -math.inf for v in back}, [], 20_000.0, recoveries=back)
    want = live_leaf_sets(ring, set())
    assert all(res.leaf[v] == want[v] for v in range(ring.n))
    assert res.messages["rejoin"] > 0 and res.messages["announce"] > 0
