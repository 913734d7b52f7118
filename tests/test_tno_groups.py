"""Sequencing groups: the Spark self-join against brute-force set computation."""
import itertools

import numpy as np
import pandas as pd
import pytest

from scribe_spark import loader
from scribe_spark.config import ConfigError, TnoSizeParams
from scribe_spark.laws import describe, model_index, popularity, zipf_exponent
from scribe_spark.reference.sequencing_groups import group_sizes as reference_sizes
from scribe_spark.tno import groups
from scribe_spark.workloads.popularity import draw_subscriptions
from tests.helpers import tables


def _brute(subs: dict[int, set[int]], need: int) -> dict[int, set[int]]:
    topics = set().union(*subs.values())
    sg = {t: {t} for t in topics}
    for t, u in itertools.permutations(topics, 2):
        if sum(1 for s in subs.values() if t in s and u in s) >= need:
            sg[t].add(u)
    return sg


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("causal", [False, True])
def test_groups_equal_brute_force_on_random_inputs(spark, seed, causal):
    rng = np.random.default_rng(seed)
    n_sub, n_top = int(rng.integers(1, 40)), int(rng.integers(2, 25))
    subs = {s: set(rng.choice(n_top, int(rng.integers(1, min(n_top, 8) + 1)), replace=False).tolist())
            for s in range(n_sub)}
    rows = [(s, t) for s, ts in subs.items() for t in ts]
    rows += rows[: len(rows) // 5]   # duplicated subscription rows must not count twice
    df = spark.createDataFrame(pd.DataFrame(rows, columns=[groups.SUBSCRIBER, groups.TOPIC]))
    got = groups.sequencing_groups(df, causal=causal, partitions=3).toPandas()
    got_sets = got.groupby(groups.TOPIC)[groups.MEMBER].apply(set).to_dict()
    want = _brute(subs, 1 if causal else 2)
    assert got_sets == want
    assert len(got) == sum(len(v) for v in want.values())   # no duplicate (topic, member) rows
    sizes = groups.sequencing_group_sizes(df, causal=causal).toPandas().set_index(groups.TOPIC)["size"]
    assert sizes.to_dict() == groups.group_sizes(groups.sequencing_groups(df, causal=causal)).toPandas() \
        .set_index(groups.TOPIC)["size"].to_dict()
    ref = reference_sizes(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]),
                          n_top, causal)
    assert all(sizes[t] == len(want[t]) == ref[t] for t in want)
    assert all(ref[t] == 0 for t in range(n_top) if t not in want)


def test_zipf_calibration_and_distinct_draws():
    for model, share in (("skewed", 0.005), ("spread", 0.40)):
        p = popularity(1000, model)
        assert p[: int(np.ceil(share * 1000))].sum() == pytest.approx(0.8, abs=1e-9)
        assert (np.diff(p) <= 0).all()
    assert zipf_exponent(1000, 0.005) > zipf_exponent(1000, 0.40)
    sub, top = draw_subscriptions(300, 20, popularity(100, "skewed"), np.random.default_rng(1))
    pairs = pd.DataFrame({"s": sub, "t": top})
    assert len(pairs) == 6000 and not pairs.duplicated().any()
    assert (pairs.groupby("s").size() == 20).all()
    # the most popular topic is picked by nearly everyone, the least by few
    counts = pairs.t.value_counts()
    assert counts.get(0, 0) > 290 and counts.get(99, 0) < counts.get(0, 0)


def test_popularity_by_shape_is_the_discrete_pareto_law():
    r = np.arange(1, 1001, dtype=np.float64)
    for model, shape in (("geographic", 0.901), ("spray_and_diffuse", 0.349), ("pareto:2.5", 2.5)):
        p = popularity(1000, model)
        want = r ** -(1 + shape)
        assert np.allclose(p, want / want.sum(), rtol=1e-12, atol=0)
        assert describe(1000, model)["exponent"] == pytest.approx(1 + shape)
    # the paper's words fit its shapes only loosely: "40% of the topics draw 80%" vs 28 topics for 0.349
    assert describe(1000, "spray_and_diffuse")["topics_drawing_80pct"] == 28
    assert describe(1000, "spread")["topics_drawing_80pct"] == 401   # 400 hold 80% up to rounding
    assert describe(1000, "skewed")["top_0.005_draws"] == pytest.approx(0.8)
    for bad in ("flat", "pareto:", "pareto:-1", "pareto:nan"):
        with pytest.raises(ConfigError, match="key 'popularity'"):
            loader.load(TnoSizeParams, None, [f'popularity=["{bad}"]'])
    with pytest.raises(ConfigError, match="distinct"):
        loader.load(TnoSizeParams, None, ['popularity=["spread", "spread"]'])


@pytest.mark.slow
def test_tno_timestamp_size_job_against_scipy_groups(tiny):
    folder = tiny("tno_timestamp_size")
    t = pd.read_csv(folder / "timestamp_size.csv")
    p = TnoSizeParams(clients=500, topics=100, topics_per_client=(1, 5, 20))   # conf/tiny
    assert list(t.popularity.unique()) == ["geographic", "spray_and_diffuse"] and len(t) == 6
    for row in t.itertuples():
        probs = popularity(p.topics, row.popularity)
        rng = np.random.default_rng([p.seed, row.topics_per_client, model_index(row.popularity)])
        sub, top = draw_subscriptions(p.clients, row.topics_per_client, probs, rng)
        subs: dict[int, set[int]] = {}
        for c, k in zip(sub.tolist(), top.tolist()):
            subs.setdefault(c, set()).add(k)
        sg = _brute(subs, 2)
        size = np.array([len(sg.get(k, ())) for k in range(p.topics)], dtype=float)
        on = size > 0
        assert row.topics_subscribed == on.sum()
        assert row.mean_size_all == pytest.approx(size.mean())
        assert row.mean_size_subscribed == pytest.approx(size[on].mean())
        assert row.mean_size_weighted_all == pytest.approx((probs * size).sum())
        want = (probs[on] * size[on]).sum() / probs[on].sum()
        assert row.mean_size_weighted_subscribed == pytest.approx(want)
    laws = pd.read_csv(folder / "popularity.csv").set_index("popularity")
    assert laws.exponent.to_dict() == pytest.approx({"geographic": 1.901, "spray_and_diffuse": 1.349})
    assert "`_all` = over all topics" in (folder / "summary.md").read_text()
    assert tables(folder).keys() >= {"timestamp_size.csv", "popularity.csv"}
