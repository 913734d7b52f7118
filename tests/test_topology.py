"""Proximity models: sizes, metric properties, and nearest-candidate search against brute force."""
import numpy as np
import pytest

from scribe_spark import topology


def test_default_transit_stub_has_5050_connected_routers():
    ts = topology.transit_stub(np.random.default_rng(1))
    assert ts.n_routers == 5050 and ts.is_transit.sum() == 50
    d = ts.delay
    assert np.isfinite(d).all() and (np.diag(d) == 0).all()
    assert np.allclose(d, d.T)
    # shortest paths obey the triangle inequality on a sample
    rng = np.random.default_rng(2)
    i, j, k = rng.integers(0, 5050, (3, 2000))
    assert (d[i, k] <= d[i, j] + d[j, k] + 1e-3).all()
    # a stub-to-stub path through the core is longer than any intra-stub hop
    assert d.max() > 2 * 50.0


def test_sphere_distance_is_great_circle():
    p = topology.Proximity("sphere", coords=np.array([[1.0, 0, 0], [0, 1.0, 0], [-1.0, 0, 0]]))
    assert np.allclose(p.dist(np.array([0, 0]), np.array([1, 2])), [np.pi / 2, np.pi])


@pytest.mark.parametrize("model", ["plane", "sphere", "sites"])
def test_nearest_matches_brute_force(model):
    rng = np.random.default_rng(4)
    n = 3000
    if model == "plane":
        p = topology.plane(n, rng)
    elif model == "sphere":
        p = topology.sphere(n, rng)
    else:
        ts = topology.transit_stub(rng, transit_domains=3, stubs_per_transit_router=3)
        p = topology.on_sites("transit-stub", n, ts.delay, topology.LAN_DELAY_MS, rng, distinct=False)
    queries = rng.choice(n, 300, replace=False)
    for cands in (rng.choice(n, 40, replace=False), rng.choice(n, 2500, replace=False)):
        got = p.nearest(queries, cands)
        # a prepared index (as kept for the state build's large classes) answers the same
        assert np.array_equal(p.nearest(queries, cands, p.search_index(cands)), got)
        for q, g in zip(queries, got):
            others = cands[cands != q]
            best = p.dist(np.full(len(others), q), others).min()
            assert g != q and p.dist(np.array([q]), np.array([g]))[0] == pytest.approx(best)


def test_load_matrix_text_and_npy(tmp_path):
    m = np.array([[0, 3.5], [3.5, 0]])
    np.save(tmp_path / "m.npy", m)
    (tmp_path / "m.csv").write_text("0,3.5\n3.5,0\n")
    assert np.allclose(topology.load_matrix(tmp_path / "m.npy"), m)
    assert np.allclose(topology.load_matrix(tmp_path / "m.csv"), m)
    (tmp_path / "neg.txt").write_text("0 -1\n-1 0\n")
    with pytest.raises(ValueError, match="non-negative"):
        topology.load_matrix(tmp_path / "neg.txt")


@pytest.mark.parametrize("model", ["transit-stub", "tied"])
def test_walking_sites_by_delay_picks_the_dense_argmin(model):
    """The per-site sorted lists give the dense block's answer, ties (lowest site) included."""
    rng = np.random.default_rng(5)
    if model == "transit-stub":
        delay = topology.transit_stub(rng, transit_domains=3, stubs_per_transit_router=4).delay
    else:   # integer delays: many ties
        delay = rng.integers(1, 6, size=(400, 400)).astype(np.float32)
        delay = np.minimum(delay, delay.T)
        np.fill_diagonal(delay, 0.0)
    s = len(delay)
    p = topology.Proximity("matrix", site=np.arange(s), site_delay=delay)
    walked = 0
    for size in (1, 3, 30, s // 3, s):
        csites = np.sort(rng.choice(s, size, replace=False))
        qsites = np.unique(rng.integers(0, s, 500))
        want = topology._closest_sites_dense(delay, qsites, csites)
        assert (p.closest_sites(qsites, csites) == want).all(), size
        walked += size ** 2 >= s
    assert walked >= 2   # the walk, not only the dense fallback, was checked
    assert topology.sites_by_delay(delay) is topology.sites_by_delay(delay)   # built once per matrix
