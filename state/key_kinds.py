"""Kinds of keys: a table's keys are of one kind, the null key (``None``, NaN) aside.

A checkpoint holds a table's keys in one Arrow column (``state.codec``), of one type:
Arrow would make str and bytes keys all bytes (two keys, ``'a'`` and ``b'a'``, one
key twice) and cannot hold str and integer keys together. So a table refuses keys of a
second kind where they come in (``KeyedTable.update``, ``KeyedTable.absorb``), naming
both, rather than at its next checkpoint; also a key that Python's equality makes one
with a key held of another kind (``True`` and ``1``), whose messages would fold into it.

The kinds are ``str``, ``bytes``, ``numeric`` (integers and floats, Python's or
numpy's: Python's equality makes ``1`` and ``1.0`` one key, and Arrow holds them in
one column), ``bool``, and any other type by its name. ``kinds_of`` finds those of an
array of keys in one pass of pandas' C (``infer_dtype``), and ``dtype_kinds`` those of
a numpy array of another dtype than object without looking at its keys.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["kinds_of", "dtype_kinds", "other_kinds", "union", "refusal", "not_held", "unhashable"]

#: The kinds of the keys that ``infer_dtype`` (nulls skipped) names; for the names not
#: here the keys are looked at one by one.
_INFERRED = {
    "string": ("str",), "bytes": ("bytes",), "integer": ("numeric",), "floating": ("numeric",),
    "mixed-integer-float": ("numeric",), "boolean": ("bool",), "empty": (),
}
#: The kind of the keys of a numpy array by the kind of its dtype (a float array may
#: hold only NaN, the null key: it then has none).
_DTYPES = {"i": ("numeric",), "u": ("numeric",), "f": ("numeric",), "U": ("str",), "S": ("bytes",), "b": ("bool",)}


def kinds_of(keys: np.ndarray) -> tuple[str, ...]:
    """The kinds of ``keys``, the null key left aside, in order of first appearance where
    there are several."""
    if keys.dtype.kind == "f":  # ``infer_dtype`` names a float array of NaN alone floating
        return () if np.isnan(keys).all() else ("numeric",)
    known = _INFERRED.get(pd.api.types.infer_dtype(keys, skipna=True))
    if known is not None:
        return known
    return tuple(dict.fromkeys(map(_kind, _not_null(keys))))


def dtype_kinds(keys: np.ndarray) -> tuple[str, ...] | None:
    """The kinds of the keys of a numpy array of another dtype than object, at most one
    (none for a float array of NaN alone); None for an array of objects."""
    return _DTYPES.get(keys.dtype.kind)


def other_kinds(keys: np.ndarray, kinds: tuple[str, ...]) -> np.ndarray:
    """Which of ``keys`` are of none of ``kinds``, the null key being of every kind: a
    mask, one key at a time (for keys known to be of other kinds too)."""
    keys = np.asarray(keys, dtype=object)
    nulls = pd.isna(keys)
    return np.fromiter((not null and _kind(key) not in kinds for key, null in zip(keys, nulls)),
                       dtype=bool, count=len(keys))


def union(*kinds: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """The kinds of all ``kinds``, in order; None if any is not known (None)."""
    if any(one is None for one in kinds):
        return None
    return tuple(dict.fromkeys(kind for one in kinds for kind in one))


def refusal(what: str, brought: tuple[str, ...], held: tuple[str, ...], keys: np.ndarray) -> str:
    """The message refusing ``keys`` of kinds ``brought`` that ``what`` brings to a table
    of keys of kinds ``held``: the kinds not held, each with its first key."""
    to = f" to a table of {' and '.join(held)} keys" if held else ""
    return (f"keys of one table must be of one kind: {what} brings {not_held(brought, held, keys)}{to}; make them "
            "of one kind first (a checkpoint holds a table's keys in one column of one type)")


def not_held(brought: tuple[str, ...], held: tuple[str, ...], keys: np.ndarray) -> str:
    """The kinds of ``brought`` not in ``held`` (all where none is held), each with its
    first key of ``keys``: ``"bytes keys (b'a')"``."""
    other = [kind for kind in brought if kind not in held] if held else list(brought)
    first: dict[str, object] = {}
    for key in _not_null(keys):
        kind = _kind(key)
        if kind in other and kind not in first:
            first[kind] = key
            if len(first) == len(other):
                break
    return " and ".join(f"{kind} keys ({_plain(first[kind])!r})" if kind in first else f"{kind} keys"
                        for kind in other)


def unhashable(keys: np.ndarray, error: TypeError, what: str = "this update") -> str:
    """The message refusing ``keys``, which ``what`` brings, that the table's hashing
    refused with ``error``: names the first key that cannot be hashed, where one of them cannot."""
    for key in keys:
        try:
            hash(key)
        except TypeError:
            return (f"keys must be hashable: {what} brings a {type(key).__name__} key ({key!r}), "
                    f"which is not ({error})")
    return f"the keys of {what} could not be hashed: {error}"


def _not_null(keys: np.ndarray) -> np.ndarray:
    keys = np.asarray(keys, dtype=object)
    return keys[~pd.isna(keys)]


def _kind(key) -> str:
    if isinstance(key, str):
        return "str"
    if isinstance(key, bytes):
        return "bytes"
    if isinstance(key, (bool, np.bool_)):
        return "bool"
    if isinstance(key, (int, float, np.integer, np.floating)):
        return "numeric"
    return type(key).__name__


def _plain(key):
    """A numpy scalar as the Python one it holds, for messages."""
    return key.item() if isinstance(key, np.generic) else key
