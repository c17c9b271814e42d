"""Interval arithmetic on numpy arrays of [start, end) pairs (int64 picoseconds)."""
from __future__ import annotations

import numpy as np

EMPTY = np.zeros((0, 2), dtype=np.int64)


def merge(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Union of intervals -> disjoint sorted (n, 2) array."""
    if len(starts) == 0:
        return EMPTY
    order = np.argsort(starts, kind="stable")
    s = np.asarray(starts)[order]
    e = np.asarray(ends)[order]
    run_end = np.maximum.accumulate(e)
    # a new block starts where start > max end so far of the previous intervals
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    block_end = np.maximum.reduceat(e, idx)
    return np.stack([s[idx], block_end], axis=1)


def union(*sets: np.ndarray) -> np.ndarray:
    sets = [x for x in sets if len(x)]
    if not sets:
        return EMPTY
    cat = np.concatenate(sets)
    return merge(cat[:, 0], cat[:, 1])


def clip(iv: np.ndarray, a: int, b: int) -> np.ndarray:
    """Disjoint sorted intervals clipped to [a, b)."""
    if len(iv) == 0 or b <= a:
        return EMPTY
    lo = np.searchsorted(iv[:, 1], a, side="right")
    hi = np.searchsorted(iv[:, 0], b, side="left")
    part = iv[lo:hi].copy()
    if len(part):
        part[0, 0] = max(part[0, 0], a)
        part[-1, 1] = min(part[-1, 1], b)
    return part


def measure(iv: np.ndarray) -> int:
    return int((iv[:, 1] - iv[:, 0]).sum()) if len(iv) else 0


def gaps(iv: np.ndarray, a: int, b: int) -> np.ndarray:
    """Complement of disjoint sorted intervals within [a, b)."""
    iv = clip(iv, a, b)
    if len(iv) == 0:
        return np.array([[a, b]], dtype=np.int64) if b > a else EMPTY
    starts = np.concatenate([[a], iv[:, 1]])
    ends = np.concatenate([iv[:, 0], [b]])
    keep = ends > starts
    return np.stack([starts[keep], ends[keep]], axis=1)
