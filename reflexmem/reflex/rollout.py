"""Sticky rollout buckets: the same account and symbol always land in the same bucket.

A limited skill version decides only the (account, symbol) pairs whose bucket is below
its rollout fraction, so an account's trades in one symbol are all decided by the same
version and an outcome can be attributed to it. The bucket is a 64-bit FNV-1a hash
(with a Murmur finalizer) of `salt|account|symbol` mapped to [0, 1); the salt is the
version's `skill_id@version`, so a new version draws a fresh, independent sample
instead of reusing the last one's.

`rollout_bucket` (one pair, the router) and `rollout_buckets` (a frame, the shadow
primitives) compute the same function; the frame version hashes each distinct pair
once with numpy over its bytes, not once per row.
"""

from __future__ import annotations

import numpy as np
import polars as pl

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK = (1 << 64) - 1
FMIX = (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53)
"""MurmurHash3's 64-bit finalizer, applied after FNV-1a so that similar keys (acc1, acc2)
spread evenly over [0, 1) rather than clustering in the high bits."""


def _fmix(h: int) -> int:
    h ^= h >> 33
    h = (h * FMIX[0]) & MASK
    h ^= h >> 33
    h = (h * FMIX[1]) & MASK
    return h ^ (h >> 33)


def _key(salt: str, account: str, symbol: str) -> bytes:
    return f"{salt}|{account}|{symbol}".encode()


def rollout_bucket(account: str, symbol: str, salt: str) -> float:
    """The pair's position in [0, 1) under `salt`."""
    h = FNV_OFFSET
    for byte in _key(salt, account, symbol):
        h = ((h ^ byte) * FNV_PRIME) & MASK
    return (_fmix(h) >> 11) / float(1 << 53)


def _fnv_many(keys: list[bytes]) -> np.ndarray[tuple[int], np.dtype[np.float64]]:
    if not keys:
        return np.zeros(0)
    width = max(len(k) for k in keys)
    raw = np.frombuffer(b"".join(k.ljust(width, b"\0") for k in keys), dtype=np.uint8)
    table = raw.reshape(len(keys), width).astype(np.uint64)
    lengths = np.array([len(k) for k in keys])
    h = np.full(len(keys), FNV_OFFSET, dtype=np.uint64)
    prime = np.uint64(FNV_PRIME)
    with np.errstate(over="ignore"):
        for col in range(width):
            live = lengths > col
            h = np.where(live, (h ^ table[:, col]) * prime, h)
        shift = np.uint64(33)
        h ^= h >> shift
        h *= np.uint64(FMIX[0])
        h ^= h >> shift
        h *= np.uint64(FMIX[1])
        h ^= h >> shift
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def rollout_buckets(
    frame: pl.DataFrame, salt: str, *, account: str = "account", symbol: str = "symbol"
) -> pl.Series:
    """The bucket of every row's (account, symbol) pair under `salt` (null if either is)."""
    pairs = frame.select(pl.col(account).cast(pl.String), pl.col(symbol).cast(pl.String))
    distinct = pairs.unique().drop_nulls()
    keys = [_key(salt, a, s) for a, s in distinct.iter_rows()]
    hashed = distinct.with_columns(pl.Series("bucket", _fnv_many(keys), dtype=pl.Float64))
    joined = pairs.join(hashed, on=[account, symbol], how="left", maintain_order="left")
    return joined["bucket"]


def in_rollout(account: str | None, symbol: str | None, salt: str, fraction: float) -> bool:
    """Whether a limited version with `fraction` decides this pair (never without one)."""
    if account is None or symbol is None:
        return False
    return rollout_bucket(account, symbol, salt) < fraction
