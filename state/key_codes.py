"""Key codes: a column of keys numbered by first appearance, so that a table hashes its
keys about once per batch and works on integers after that.

``factorize_keys`` numbers the keys (a null key, ``None`` or NaN, is a key like any
other); ``first_rows`` finds the first row of each code again without hashing a key.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["factorize_keys", "first_rows"]


def factorize_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(keys, use_na_sentinel=False)``: codes numbered by first appearance,
    a null key (``None``, NaN) a key like any other. Without nulls, which is the usual
    case, pandas' default path gives the same and skips its scan for nulls of an object
    array first, a third of the time."""
    codes, unique_keys = pd.factorize(keys)
    if len(codes) and codes.min() < 0:
        return pd.factorize(keys, use_na_sentinel=False)
    return codes, unique_keys


def first_rows(codes: np.ndarray) -> np.ndarray:
    """Index of the first row of each code, for codes numbered by first appearance: the
    rows whose code is above every code before them (no sort)."""
    if not len(codes):
        return np.empty(0, dtype=np.intp)
    highest = np.maximum.accumulate(codes)
    new = np.empty(len(codes), dtype=bool)
    new[0] = True
    np.greater(highest[1:], highest[:-1], out=new[1:])
    return np.flatnonzero(new)
