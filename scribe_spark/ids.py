"""128-bit Pastry ids as pairs of uint64 arrays (hi, lo): exact ring arithmetic, digits, hex.

Every function is vectorized over numpy arrays and never goes through floats, so a
distance comparison can never be changed by rounding.
"""
from __future__ import annotations

import numpy as np

ID_BITS = 128
_U64 = np.uint64
_MASK32 = np.uint64(0xFFFFFFFF)


def random_ids(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Return n distinct uniformly random 128-bit ids as (hi, lo)."""
    hi = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    lo = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    order = np.lexsort((lo, hi))
    require_distinct(hi[order], lo[order])
    return hi, lo


def require_distinct(shi: np.ndarray, slo: np.ndarray) -> None:
    """Raise ValueError if ids in ascending order (hi, lo) hold one twice (probability ~ n^2 / 2^129 for
    random ids; checked for exactness, not speed)."""
    if ((shi[1:] == shi[:-1]) & (slo[1:] == slo[:-1])).any():
        raise ValueError("duplicate random ids drawn; change the seed")


def to_hex(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Return ids as 32-char lowercase hex strings (numeric order == string order)."""
    return np.array([f"{h:016x}{l:016x}" for h, l in zip(hi.tolist(), lo.tolist())], dtype=object)


def from_hex(hexes) -> tuple[np.ndarray, np.ndarray]:
    """Parse 32-char hex strings into (hi, lo)."""
    hi = np.array([int(h[:16], 16) for h in hexes], dtype=np.uint64)
    lo = np.array([int(h[16:], 16) for h in hexes], dtype=np.uint64)
    return hi, lo


def sub(ahi, alo, bhi, blo):
    """Return (a - b) mod 2^128, i.e. the clockwise distance from b to a."""
    with np.errstate(over="ignore"):
        lo = np.asarray(alo - blo, dtype=np.uint64)
        borrow = np.asarray(alo < blo).astype(np.uint64)
        hi = np.asarray(ahi - bhi - borrow, dtype=np.uint64)
    return hi, lo


def less(ahi, alo, bhi, blo):
    """Return a < b as unsigned 128-bit integers."""
    return (ahi < bhi) | ((ahi == bhi) & (alo < blo))


def less_equal(ahi, alo, bhi, blo):
    """Return a <= b as unsigned 128-bit integers."""
    return (ahi < bhi) | ((ahi == bhi) & (alo <= blo))


def ring_distance(ahi, alo, bhi, blo):
    """Return the ring distance min(a-b, b-a) mod 2^128 as (hi, lo)."""
    dhi, dlo = sub(ahi, alo, bhi, blo)
    ehi, elo = sub(bhi, blo, ahi, alo)
    take_d = less_equal(dhi, dlo, ehi, elo)
    return np.where(take_d, dhi, ehi), np.where(take_d, dlo, elo)


def closer(ahi, alo, bhi, blo, khi, klo):
    """Return True where node a is strictly closer to key k than node b.

    Ties on ring distance go to the numerically smaller id, so "the numerically
    closest node" is always unique.
    """
    dahi, dalo = ring_distance(ahi, alo, khi, klo)
    dbhi, dblo = ring_distance(bhi, blo, khi, klo)
    strictly = less(dahi, dalo, dbhi, dblo)
    tie = (dahi == dbhi) & (dalo == dblo)
    return strictly | (tie & less(ahi, alo, bhi, blo))


def _bit_length32(x: np.ndarray) -> np.ndarray:
    # exact: a uint32 value is exactly representable in float64
    return np.frexp(x.astype(np.float64))[1].astype(np.int64)


def bit_length64(x: np.ndarray) -> np.ndarray:
    """Return the bit length of each uint64 value (0 for 0)."""
    x = np.asarray(x, dtype=np.uint64)
    top = x >> np.uint64(32)
    return np.where(top != 0, 32 + _bit_length32(top), _bit_length32(x & _MASK32))


def shared_prefix_bits(ahi, alo, bhi, blo) -> np.ndarray:
    """Return the number of leading bits a and b share (128 when equal)."""
    xhi = np.asarray(ahi ^ bhi, dtype=np.uint64)
    xlo = np.asarray(alo ^ blo, dtype=np.uint64)
    return np.where(xhi != 0, 64 - bit_length64(xhi), 128 - bit_length64(xlo))


def shared_prefix_digits(ahi, alo, bhi, blo, b: int) -> np.ndarray:
    """Return the number of leading b-bit digits a and b share."""
    return shared_prefix_bits(ahi, alo, bhi, blo) // b


def digit(hi, lo, r, b: int) -> np.ndarray:
    """Return digit r (0 = most significant) of each id; r may be an array.

    b divides 64, so a digit never straddles the two halves.
    """
    r = np.asarray(r, dtype=np.int64)
    off = r * b
    word = np.where(off < 64, hi, lo)
    shift = (64 - b - (off % 64)).astype(np.uint64)
    return ((word >> shift) & np.uint64((1 << b) - 1)).astype(np.int64)


def prefix_floor(hi, lo, nbits):
    """Return each id with all bits after the first nbits cleared (nbits may be an array)."""
    nbits = np.asarray(nbits, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.uint64)
    lo = np.asarray(lo, dtype=np.uint64)
    keep_hi = np.clip(nbits, 0, 64)
    keep_lo = np.clip(nbits - 64, 0, 64)
    mhi = _high_mask(keep_hi)
    mlo = _high_mask(keep_lo)
    return hi & mhi, lo & mlo


def _high_mask(k: np.ndarray) -> np.ndarray:
    """Return uint64 masks with the top k bits set (k in 0..64)."""
    k = np.asarray(k, dtype=np.int64)
    full = np.uint64(0xFFFFFFFFFFFFFFFF)
    safe = np.clip(64 - k, 0, 63).astype(np.uint64)
    m = (full >> safe) << safe
    return np.where(k == 0, np.uint64(0), np.where(k == 64, full, m))


def prefix_end(hi, lo, nbits):
    """Return floor + 2^(128 - nbits) for prefix floors, as (hi, lo, overflow).

    overflow is True where the sum reaches 2^128 (the class runs to the ring's end).
    """
    nbits = np.asarray(nbits, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.uint64)
    lo = np.asarray(lo, dtype=np.uint64)
    p = 128 - nbits
    in_lo = p < 64
    in_hi = (p >= 64) & (p < 128)
    add_lo = np.where(in_lo, np.left_shift(np.uint64(1), np.clip(p, 0, 63).astype(np.uint64)), np.uint64(0))
    add_hi = np.where(in_hi, np.left_shift(np.uint64(1), np.clip(p - 64, 0, 63).astype(np.uint64)),
                      np.uint64(0))
    nlo = lo + add_lo
    carry = (nlo < lo).astype(np.uint64)
    nhi = hi + add_hi + carry
    overflow = (p >= 128) | (nhi < hi) | ((carry == 1) & (nhi == 0))
    return nhi, nlo, overflow


def searchsorted(shi, slo, qhi, qlo) -> np.ndarray:
    """Return, for each query, the number of sorted ids strictly less than it."""
    qhi = np.asarray(qhi, dtype=np.uint64)
    qlo = np.asarray(qlo, dtype=np.uint64)
    left = np.searchsorted(shi, qhi, side="left")
    right = np.searchsorted(shi, qhi, side="right")
    out = left.copy()
    one = (right - left) == 1
    out[one] += (slo[left[one]] < qlo[one])
    for i in np.flatnonzero((right - left) > 1):  # equal high halves: astronomically rare
        out[i] = left[i] + np.searchsorted(slo[left[i]:right[i]], qlo[i], side="left")
    return out
