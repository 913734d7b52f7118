"""The Spark TNO check against the direct pairwise comparison (reference.pairwise_order)."""
import itertools

import numpy as np
import pytest
from pyspark.testing import assertDataFrameEqual

from scribe_spark.reference.pairwise_order import pairwise_check
from scribe_spark.tno.check import (
    INVERTED,
    RANKS,
    check_tno,
    inverted_frame,
    inverted_pairs,
    notifications_frame,
    pairs_in_either,
    reference_ranks,
)


@pytest.mark.parametrize("seed", range(20))
def test_inverted_pairs_are_every_pair_against_the_rank_order(seed):
    rng = np.random.default_rng(seed)
    ranks = rng.permutation(rng.integers(0, 30)).astype(np.int32)
    if seed % 2:     # nearly sorted, as logs mostly are
        ranks = np.sort(ranks)
        for _ in range(3):
            if len(ranks) > 1:
                i = rng.integers(0, len(ranks) - 1)
                ranks[[i, i + 1]] = ranks[[i + 1, i]]
    x, y = inverted_pairs(ranks)
    brute = {(int(ranks[j]), int(ranks[i])) for i, j in itertools.combinations(range(len(ranks)), 2)
             if ranks[i] > ranks[j]}
    assert sorted(zip(x.tolist(), y.tolist())) == sorted(brute) and len(x) == len(brute)


def test_a_hand_built_case(spark):
    # rank order 10 < 11 < 12 (mean relative positions): subscriber 1 inverts {10, 11}
    logs = {0: [10, 11, 12], 1: [11, 10, 12], 2: [10, 12], 3: []}
    res = check_tno(notifications_frame(spark, logs), subscribers=len(logs), undelivered=2)
    got = (res.subscriber_pairs, res.violating_pairs, res.inverted_event_pairs, res.undelivered)
    assert got == (6, 1, 1, 2) and not res.tno_holds and not res.ok
    notifications = notifications_frame(spark, logs)
    ranks = reference_ranks(notifications)
    assertDataFrameEqual(ranks, spark.createDataFrame([(10, 0), (11, 1), (12, 2)], RANKS))
    expected = spark.createDataFrame([(1, 0, 1)], INVERTED)
    assertDataFrameEqual(inverted_frame(notifications.join(ranks, "event")), expected)


def _logs(rng: np.random.Generator, subscribers: int, events: int, disorder: str) -> dict[int, list[int]]:
    """Random logs: each subscriber notified of a random subset, in one common order, perturbed or random."""
    logs = {}
    for s in range(subscribers):
        mine = np.flatnonzero(rng.random(events) < rng.uniform(0.1, 0.9))
        if disorder == "random":
            mine = rng.permutation(mine)
        elif disorder == "swaps":
            for _ in range(rng.integers(0, 4)):
                if len(mine) > 1:
                    i = rng.integers(0, len(mine) - 1)
                    mine[[i, i + 1]] = mine[[i + 1, i]]
        logs[100 + 7 * s] = [int(e) for e in mine]
    return logs


@pytest.mark.parametrize("n", [1, 7, 8, 9, 30])
def test_pairs_in_either_counts_each_unordered_pair_once(n):
    rng = np.random.default_rng(n)
    bits = rng.random((n, n)) < 0.2
    np.fill_diagonal(bits, False)
    packed = np.packbits(bits, axis=1, bitorder="little")
    want = sum(bool(bits[s, t] or bits[t, s]) for s in range(n) for t in range(s + 1, n))
    assert [pairs_in_either(packed, block=k) for k in (8, 12, 4096)] == [want] * 3


@pytest.mark.parametrize("disorder", ["none", "swaps", "random"])
def test_spark_check_equals_the_pairwise_comparison(spark, disorder):
    rng = np.random.default_rng(["none", "swaps", "random"].index(disorder))
    for subscribers, events in [(2, 5), (25, 40), (70, 30)]:
        logs = _logs(rng, subscribers, events, disorder)
        want = pairwise_check(logs)
        got = check_tno(notifications_frame(spark, logs), subscribers=len(logs))
        assert got == want, (subscribers, events)
        # a task's bit rows gathered one pair (with all its rows) at a time: the same answer
        assert check_tno(notifications_frame(spark, logs), len(logs), chunk_bytes=1) == want
        if disorder == "none":
            assert got.violating_pairs == 0
        elif subscribers > 2:     # two small random logs may happen to agree
            assert got.violating_pairs > 0
    # the times only choose the reference order: random ones give the same answer
    times = {s: rng.random(len(log)).tolist() for s, log in logs.items()}
    assert check_tno(notifications_frame(spark, logs, times), subscribers=len(logs)) == want
