"""Node failures and repair: routes, leaf sets and routing tables against brute force (SPEC P3)."""
import numpy as np
import pandas as pd
import pytest

from scribe_spark import ids
from scribe_spark.pastry import failures as fl, kernels, overlay as ov
from scribe_spark.pastry.kernels import Ring
from tests.conftest import run_quick
from tests.test_pastry import _closest_brute, _ints, _ring


@pytest.fixture(scope="module")
def failed(spark):
    """600 nodes (b=2, |L|=8), 15% failed; the converged overlay and the repaired one."""
    ring = _ring(600, b=2, leaf=8, nbr=8, seed=4)
    rng = np.random.default_rng(5)
    dead = np.zeros(ring.n, dtype=bool)
    dead[rng.choice(ring.n, 90, replace=False)] = True
    overlay = ov.build_overlay(spark, ring, "proximity", seed=1)
    repaired, counts = fl.repair(overlay, dead, log=lambda m: None)
    return ring, dead, overlay, repaired, counts


def _lookups(ring, dead, count=400, seed=6):
    rng = np.random.default_rng(seed)
    src = rng.choice(np.flatnonzero(~dead), count)
    khi, klo = ids.random_ids(count, rng)
    return src, khi, klo


def test_closest_live_matches_brute_force(failed):
    ring, dead, *_ = failed
    _, khi, klo = _lookups(ring, dead, 200)
    ints = _ints(ring)
    live = np.flatnonzero(~dead)
    live_ints = [ints[i] for i in live]
    want = [live[_closest_brute(live_ints, (int(h) << 64) | int(l))] for h, l in zip(khi, klo)]
    assert (fl.closest_live(ring, ~dead, khi, klo) == want).all()


@pytest.mark.parametrize("phase", ["after_failure", "after_repair"])
def test_lookups_reach_the_closest_live_node(spark, failed, phase):
    ring, dead, overlay, repaired, _ = failed
    current = fl.without_dead(overlay, dead) if phase == "after_failure" else repaired
    src, khi, klo = _lookups(ring, dead)
    routed = ov.route(current, ov.messages_frame(spark, src, khi, klo), log=lambda m: None).toPandas().sort_values("mid")
    assert (routed.dest.to_numpy() == fl.closest_live(ring, ~dead, khi, klo)).all()
    assert not dead[routed.dest].any()


def test_repaired_leaf_sets_equal_the_converged_leaf_sets_of_the_survivors(failed):
    ring, dead, _, repaired, counts = failed
    live = np.flatnonzero(~dead)
    survivors = Ring(ring.hi[live], ring.lo[live], ring.b, ring.leaf_set, ring.neighborhood, ring.prox)
    want = {int(live[i]): set(live[s].tolist()) for i, s in enumerate(kernels.leaf_sets(survivors, np.arange(len(live))))}
    got = repaired.state.select("id", "leaf").toPandas()
    assert len(got) == len(live)
    assert all(set(np.asarray(leaf).tolist()) == want[i] for i, leaf in zip(got.id, got.leaf))
    assert counts["leaf_messages"] > 0 and counts["leaf_messages"] % 2 == 0


def test_repaired_routing_tables_hold_only_live_valid_entries(failed):
    ring, dead, overlay, repaired, counts = failed
    cols, digits = 1 << ring.b, ring.digits
    st = repaired.state.select("id", "rt").toPandas()
    before = overlay.state.select("id", "rt").toPandas().set_index("id").rt
    filled = 0
    for node, rt in zip(st.id, st.rt):
        rt = np.asarray(rt)
        assert len(rt) == len(before[node])
        slot = np.flatnonzero(rt >= 0)
        e = rt[slot]
        assert not dead[e].any()
        r, c = slot // cols, slot % cols
        assert (ids.shared_prefix_digits(ring.hi[e], ring.lo[e], np.full(len(e), ring.hi[node]),
                                         np.full(len(e), ring.lo[node]), ring.b) >= r).all()
        assert (ids.digit(ring.hi[e], ring.lo[e], np.minimum(r, digits - 1), ring.b) == c).all()
        old = np.asarray(before[node])
        filled += int(((old >= 0) & dead[np.maximum(old, 0)] & (rt >= 0)).sum())
    assert filled == counts["table_repaired"] > 0
    assert counts["table_holes"] >= counts["table_repaired"]
    assert counts["table_messages"] >= 2 * counts["table_repaired"]


@pytest.mark.slow
def test_pastry_failures_job(spark, tmp_path):
    from scribe_spark.config import PastryFailuresParams
    from scribe_spark.pastry.failures_experiment import run
    run_quick("pastry_failures", PastryFailuresParams, run, tmp_path, "nodes=800", "lookups=3000")
    t = pd.read_csv(tmp_path / "pastry_failures" / "failures.csv").set_index("phase")
    assert list(t.index) == ["before", "after_failure", "after_repair"]
    assert (t.lookups == 3000).all()
    assert t.loc["before", "correct_fraction"] == 1.0 and t.loc["after_repair", "correct_fraction"] == 1.0
    assert t.loc["after_failure", "rare_case_hops"] > t.loc["after_repair", "rare_case_hops"]
    assert t.loc["after_repair", "repair_messages_per_failed_node"] > 0
    assert (tmp_path / "pastry_failures" / "failures.png").stat().st_size > 0
