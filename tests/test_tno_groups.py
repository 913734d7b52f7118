"""Sequencing groups: the Spark self-join against brute-force set computation."""
import itertools

import numpy as np
import pandas as pd
import pytest

from scribe_spark.tno import groups
from scribe_spark.workloads.popularity import draw_subscriptions, popularity, zipf_exponent


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
    ref = groups.sequencing_groups_scipy(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]),
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
