"""How a monoid's values sit in columns, and its folds over them.

The runtime keeps the states of many keys as *columns*: one-dimensional numpy arrays
of values whose type is the monoid's ``dtype`` (a number, a structured record, or
``object``). It updates them with ``reduce_by_key`` and ``plus_columns``; each of
these must equal the scalar fold (``monoids.laws`` checks it). The defaults here loop
over ``plus``; a monoid with a numeric layout overrides them with vectorized numpy
code.

``Columns`` is mixed into ``monoids.Monoid`` and uses only its algebra (``zero``,
``plus``, ``sum``, ``validate``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["Columns", "object_column", "join_columns", "records_as_bytes"]


def object_column(items: Sequence[Any]) -> np.ndarray:
    """A 1-d ``object`` array holding ``items`` as they are (tuples and lists stay single cells)."""
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def records_as_bytes(dtype: np.dtype) -> np.dtype | None:
    """The dtype that columns of records (a structured ``dtype`` without ``object``
    fields) are copied as: their bytes, row by row. numpy copies records field by field,
    five times slower than a copy of the bytes, which gives the same records. None for
    any other ``dtype``."""
    return None if dtype.names is None or dtype.hasobject else np.dtype((np.void, dtype.itemsize))


def join_columns(columns: Sequence[np.ndarray]) -> np.ndarray:
    """``np.concatenate(columns)``. Columns of records are joined as their bytes
    (``records_as_bytes``), in the columns' own dtype (numpy's would be packed and
    native-endian)."""
    dtype = columns[0].dtype if len(columns) else None
    raw = records_as_bytes(dtype) if dtype is not None and all(c.dtype == dtype for c in columns) else None
    if raw is None:
        return np.concatenate(columns)
    return np.concatenate([c.view(raw) for c in columns]).view(dtype)


class Columns:
    """The column layout (``dtype``, ``column``, ``values``) and the folds over columns."""

    #: numpy dtype of the columns of values: ``object`` unless the values are fixed-width
    #: records, which ``monoids.codec`` then encodes as they are.
    dtype: np.dtype = np.dtype(object)

    def column(self, values: Iterable[Any], where: str = "") -> np.ndarray:
        """A column (1-d array of ``dtype``) holding ``values``, each validated."""
        checked = [self.validate(v, where) for v in values]
        if self.dtype == object:
            return object_column(checked)
        return np.array(checked, dtype=self.dtype)

    def values(self, column: np.ndarray) -> list[Any]:
        """The values of a column, as scalar values of the monoid (records as tuples)."""
        return column.tolist()

    def zeros(self, n: int) -> np.ndarray:
        """A column of ``n`` zeros (distinct objects where values are mutable)."""
        return self.column([self.zero() for _ in range(n)])

    def fold(self, column: np.ndarray) -> Any:
        """The fold of a column, ``sum(values(column))``: ``reduce_by_key`` with one key, so
        a monoid that vectorizes ``reduce_by_key`` folds with it too."""
        return self.values(self.reduce_by_key(np.zeros(len(column), dtype=np.intp), 1, column))[0]

    def reduce_by_key(self, codes: np.ndarray, n: int, column: np.ndarray) -> np.ndarray:
        """Folds ``column`` per key: ``out[k]`` is the fold, in row order, of the rows
        with ``codes == k`` (``zero()`` where there is none), for ``0 <= k < n``."""
        totals = [self.zero() for _ in range(n)]
        for code, value in zip(np.asarray(codes).tolist(), self.values(column)):
            totals[code] = self.plus(totals[code], value)
        return self.column(totals)

    def plus_columns(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Elementwise ``plus`` of two columns of equal length."""
        return self.column([self.plus(x, y) for x, y in zip(self.values(a), self.values(b))])
