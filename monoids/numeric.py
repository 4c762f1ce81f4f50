"""Numeric monoids on numpy columns: ``Sum``, ``Count``, ``Max``, ``Min``.

Integer sums are exact: a sum that leaves 64 bits raises ``MonoidValueError`` (in
``plus`` and in every column operation alike) instead of wrapping around.
Float sums round, so regrouping them (associativity, commutativity) changes the last
bits; ``Sum.equivalent`` compares floats with a tolerance. The column operations add
in row order, exactly like the scalar fold.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from monoids.base import Group, Monoid, MonoidTypeError, MonoidValueError

__all__ = ["Sum", "Count", "Max", "Min", "REL_TOL", "ABS_TOL"]

_KINDS = {int: np.dtype(np.int64), float: np.dtype(np.float64)}
_INT64 = np.iinfo(np.int64)
_LOW32 = np.int64(0xFFFFFFFF)

#: Default tolerances of the float monoids' ``equivalent``.
REL_TOL = 1e-9
ABS_TOL = 1e-9


def close(x: float, y: float, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL) -> bool:
    """Whether two floats are equal up to rounding (``math.isclose``; infinities equal themselves)."""
    return x == y or math.isclose(x, y, rel_tol=rel_tol, abs_tol=abs_tol)


def checked_int(who: Monoid, total: int, what: str) -> int:
    """``total`` if it fits in 64 bits, else ``MonoidValueError`` naming ``what`` was summed."""
    if not _INT64.min <= total <= _INT64.max:
        raise MonoidValueError(f"{who!r}: {what} = {total} does not fit in 64 bits")
    return total


def add_int64(who: Monoid, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise ``a + b`` of int64 columns; ``MonoidValueError`` where a sum overflows."""
    out = a + b
    overflow = ((a ^ out) & (b ^ out)) < 0
    if overflow.any():
        row = int(np.flatnonzero(overflow)[0])
        checked_int(who, int(a[row]) + int(b[row]), f"row {row}: {int(a[row])} + {int(b[row])}")
    return out


def int64_sums(who: Monoid, codes: np.ndarray, n: int, column: np.ndarray) -> np.ndarray:
    """Exact per-key sums of an int64 column (``n`` keys); ``MonoidValueError`` on overflow.

    Sums the low and the high 32 bits of the values separately, which cannot wrap
    for fewer than 2**31 rows, then checks that each total fits in 64 bits.
    """
    low = np.zeros(n, dtype=np.int64)
    high = np.zeros(n, dtype=np.int64)
    np.add.at(low, codes, column & _LOW32)
    np.add.at(high, codes, column >> 32)
    high += low >> 32
    overflow = (high < -(2**31)) | (high >= 2**31)
    if overflow.any():
        key = int(np.flatnonzero(overflow)[0])
        checked_int(who, (int(high[key]) << 32) + int(low[key] & _LOW32), f"the sum of key {key}")
    return (high << 32) | (low & _LOW32)


def _number_dtype(kind: type) -> np.dtype:
    try:
        return _KINDS[kind]
    except KeyError:
        raise MonoidTypeError(f"numeric monoids take int or float, not {kind!r}") from None


class _Numeric(Monoid):
    """Shared column code for monoids whose values are 64-bit numbers (``dtype`` by ``kind``)."""

    dtype = result_dtype = _KINDS[int]

    def __init__(self, kind: type = int):
        self.kind = kind
        self.dtype = _number_dtype(kind)
        self.result_dtype = self.dtype

    def params(self) -> dict[str, Any]:
        return {"kind": self.kind.__name__}

    @classmethod
    def from_params(cls, params):
        kinds = {kind.__name__: kind for kind in _KINDS}
        if params.get("kind") not in kinds:
            raise MonoidTypeError(f"{cls.__name__} kind must be one of {sorted(kinds)}, got {params.get('kind')!r}")
        return cls(kinds[params["kind"]])

    def validate(self, value: Any, where: str = "") -> Any:
        at = f" at {where}" if where else ""
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise MonoidTypeError(f"{self!r} takes {self.kind.__name__} values, got {value!r}{at}")
        if self.kind is int:
            if not isinstance(value, numbers.Integral):
                raise MonoidTypeError(f"{self!r} takes int values, got {value!r}{at}")
            if not _INT64.min <= int(value) <= _INT64.max:
                raise MonoidValueError(f"{self!r}: {value!r}{at} does not fit in 64 bits")
            return int(value)
        try:
            value = float(value)
        except OverflowError:
            raise MonoidValueError(f"{self!r}: {value!r}{at} is too large for a float") from None
        if math.isnan(value):
            raise MonoidValueError(f"{self!r} cannot take NaN{at}")
        return value

    def present_column(self, column: np.ndarray) -> np.ndarray:
        """The column itself, where a number presents as itself (neither ``present`` nor
        ``values`` is overridden): a micro-batch's results are not walked one by one in
        Python."""
        if type(self).present is Monoid.present and type(self).values is Monoid.values:
            return column.astype(self.result_dtype, copy=False)
        return super().present_column(column)

    def column(self, values, where: str = "") -> np.ndarray:
        if isinstance(values, np.ndarray) and values.dtype == self.dtype:
            if self.kind is float and np.isnan(values).any():
                row = int(np.flatnonzero(np.isnan(values))[0])
                at = f" at {where}" if where else ""
                raise MonoidValueError(f"{self!r} cannot take NaN (row {row}{at})")
            return values
        return np.array([self.validate(v, where) for v in values], dtype=self.dtype)


class Sum(_Numeric, Group):
    """Sum of 64-bit integers (``Sum(int)``, the default) or floats (``Sum(float)``).

    Integer sums that leave 64 bits raise ``MonoidValueError``.
    """

    name = "sum"

    def zero(self):
        return self.kind(0)

    def plus(self, a, b):
        if self.kind is int:
            return checked_int(self, a + b, f"{a} + {b}")
        return a + b

    def minus(self, a, b):
        if self.kind is int:
            return checked_int(self, a - b, f"{a} - {b}")
        return a - b

    def equivalent(self, a, b, *, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL) -> bool:
        """Integers: ``==``; floats: equal within ``rel_tol`` or ``abs_tol``."""
        if self.kind is int:
            return a == b
        return close(a, b, rel_tol, abs_tol)

    def reduce_by_key(self, codes: np.ndarray, n: int, column: np.ndarray) -> np.ndarray:
        if self.kind is float:
            return np.bincount(codes, weights=column, minlength=n)
        return int64_sums(self, codes, n, column)

    def plus_columns(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.kind is float:
            return a + b
        return add_int64(self, a, b)


class Count(Sum):
    """Number of messages: a ``Sum(int)`` whose per-message value is 1."""

    name = "count"

    def __init__(self):
        super().__init__(int)

    def params(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_params(cls, params):
        return cls(**params)


class _Extremum(_Numeric):
    """Shared code of ``Max`` and ``Min``; ``_ufunc`` picks the winner of two columns."""

    _ufunc: np.ufunc
    _identity_sign: int

    def zero(self):
        if self.kind is float:
            return self._identity_sign * math.inf
        return int(_INT64.min if self._identity_sign < 0 else _INT64.max)

    def plus(self, a, b):
        return self._ufunc(a, b).item()

    def fold(self, column: np.ndarray):
        return self._ufunc.reduce(column).item() if len(column) else self.zero()

    def reduce_by_key(self, codes: np.ndarray, n: int, column: np.ndarray) -> np.ndarray:
        out = np.full(n, self.zero(), dtype=self.dtype)
        self._ufunc.at(out, codes, column)
        return out

    def plus_columns(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self._ufunc(a, b)


class Max(_Extremum):
    """Largest value; ``zero()`` is ``-inf`` (floats) or the smallest 64-bit integer."""

    name = "max"
    _ufunc = np.maximum
    _identity_sign = -1


class Min(_Extremum):
    """Smallest value; ``zero()`` is ``+inf`` (floats) or the largest 64-bit integer."""

    name = "min"
    _ufunc = np.minimum
    _identity_sign = 1
