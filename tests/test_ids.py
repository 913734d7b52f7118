"""128-bit ring arithmetic against Python integers."""
import bisect

import numpy as np

from scribe_spark import ids
from tests.helpers import M, int_ids


def _edge_ids(rng, n):
    hi, lo = rng.integers(0, 2**64, n, dtype=np.uint64), rng.integers(0, 2**64, n, dtype=np.uint64)
    special = [(0, 0), (0, 1), (2**64 - 1, 2**64 - 1), (2**63, 0), (0, 2**64 - 1), (1, 0), (2**64 - 1, 0)]
    for i, (h, l) in enumerate(special):
        hi[i], lo[i] = h, l
    return hi, lo


def test_sub_and_ring_distance_match_python_ints():
    rng = np.random.default_rng(3)
    ahi, alo = _edge_ids(rng, 500)
    bhi, blo = rng.permutation(ahi), rng.permutation(alo)
    a, b = int_ids(ahi, alo), int_ids(bhi, blo)
    dhi, dlo = ids.sub(ahi, alo, bhi, blo)
    assert int_ids(dhi, dlo) == [(x - y) % M for x, y in zip(a, b)]
    rhi, rlo = ids.ring_distance(ahi, alo, bhi, blo)
    assert int_ids(rhi, rlo) == [min((x - y) % M, (y - x) % M) for x, y in zip(a, b)]
    assert list(ids.less(ahi, alo, bhi, blo)) == [x < y for x, y in zip(a, b)]


def test_closer_breaks_ties_towards_smaller_id():
    # key exactly between 10 and 20: both at distance 5, the smaller id wins
    one = np.array([0], dtype=np.uint64)
    a_lo, b_lo, k_lo = np.array([10], np.uint64), np.array([20], np.uint64), np.array([15], np.uint64)
    assert ids.closer(one, a_lo, one, b_lo, one, k_lo)[0]
    assert not ids.closer(one, b_lo, one, a_lo, one, k_lo)[0]
    # across the wrap: 2^128-1 is at distance 2 from key 1, node 4 at distance 3
    top = np.array([2**64 - 1], np.uint64)
    assert ids.closer(top, top, one, np.array([4], np.uint64), one, np.array([1], np.uint64))[0]


def test_prefix_digits_and_digit_extraction():
    rng = np.random.default_rng(5)
    ahi, alo = _edge_ids(rng, 300)
    bhi, blo = ahi.copy(), alo.copy()
    # force long shared prefixes, including across the 64-bit boundary
    blo[::2] ^= np.uint64(1) << np.uint64(3)
    bhi[1::2] ^= np.uint64(1) << np.uint64(40)
    for b in (1, 2, 4, 8):
        spd = ids.shared_prefix_digits(ahi, alo, bhi, blo, b)
        for x, y, got in zip(int_ids(ahi, alo), int_ids(bhi, blo), spd):
            bits = 128 if x == y else 128 - (x ^ y).bit_length()
            assert got == bits // b
        r = rng.integers(0, 128 // b, 300)
        got = ids.digit(ahi, alo, r, b)
        want = [(x >> (128 - b * (int(k) + 1))) & ((1 << b) - 1) for x, k in zip(int_ids(ahi, alo), r)]
        assert list(got) == want


def test_prefix_floor_end_and_searchsorted():
    rng = np.random.default_rng(7)
    hi, lo = ids.random_ids(2000, rng)
    order = np.lexsort((lo, hi))
    shi, slo = hi[order], lo[order]
    sorted_ints = int_ids(shi, slo)
    for nbits in (0, 4, 60, 64, 68, 127, 128):
        fhi, flo = ids.prefix_floor(hi[:50], lo[:50], nbits)
        ehi, elo, over = ids.prefix_end(fhi, flo, nbits)
        for x, f, e, o in zip(int_ids(hi[:50], lo[:50]), int_ids(fhi, flo), int_ids(ehi, elo), over):
            want_f = x >> (128 - nbits) << (128 - nbits) if nbits < 128 else x
            assert f == want_f
            want_e = want_f + (1 << (128 - nbits))
            assert bool(o) == (want_e >= M)
            if not o:
                assert e == want_e
    qhi, qlo = ids.random_ids(500, rng)
    qhi[:100], qlo[:100] = shi[:100], slo[:100]  # exact hits
    got = ids.searchsorted(shi, slo, qhi, qlo)
    assert list(got) == [bisect.bisect_left(sorted_ints, q) for q in int_ids(qhi, qlo)]


def test_hex_round_trip_and_order():
    rng = np.random.default_rng(9)
    hi, lo = ids.random_ids(100, rng)
    hexes = ids.to_hex(hi, lo)
    assert all(len(h) == 32 and h == h.lower() for h in hexes)
    assert [int(h, 16) for h in hexes] == int_ids(hi, lo)
    h2, l2 = ids.from_hex(hexes)
    assert (h2 == hi).all() and (l2 == lo).all()
    assert sorted(hexes) == list(ids.to_hex(*[a[np.lexsort((lo, hi))] for a in (hi, lo)]))
