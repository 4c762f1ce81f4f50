"""Statistics on structured columns: ``Averaged`` (mean) and ``Moments`` (mean, variance).

Values are frozen dataclasses; columns are numpy structured arrays with the same
field names. Observations must be finite floats; ``prepare`` turns one observation
into a value and ``prepare_column`` does it for a whole array at once.

Both keep float sums, so regrouping (associativity, commutativity, the vectorized
column operations) changes the last bits: ``equivalent`` compares the float fields
within ``REL_TOL`` / ``ABS_TOL``. Counts are exact 64-bit integers.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from monoids.base import Group, Monoid, MonoidTypeError, MonoidValueError
from monoids.numeric import ABS_TOL, REL_TOL, add_int64, checked_int, close, int64_sums

__all__ = ["AveragedValue", "Averaged", "MomentsValue", "Moments"]


@dataclass(frozen=True, slots=True)
class AveragedValue:
    """``count`` observations summing to ``total``."""

    count: int
    total: float

    @property
    def mean(self) -> float:
        """``total / count``; NaN when ``count`` is 0."""
        return self.total / self.count if self.count else math.nan


@dataclass(frozen=True, slots=True)
class MomentsValue:
    """``count`` observations with mean ``mean`` and sum of squared deviations ``m2``."""

    count: int
    mean: float
    m2: float

    @property
    def variance(self) -> float:
        """Population variance ``m2 / count``; NaN when ``count`` is 0."""
        return self.m2 / self.count if self.count else math.nan

    @property
    def stddev(self) -> float:
        """Population standard deviation; NaN when ``count`` is 0."""
        return math.sqrt(self.variance)


_INT64 = np.iinfo(np.int64)
_INT64_MIN, _INT64_MAX = int(_INT64.min), int(_INT64.max)


def _at(where: str) -> str:
    return f" at {where}" if where else ""


class _Record(Monoid):
    """Values are ``record`` dataclasses; ``dtype`` has a ``count`` field plus float fields.

    ``present`` is ``<_presented field> / count`` (NaN for count 0).
    """

    record: ClassVar[type]
    #: The field an observation goes to (``prepare``).
    _observed: ClassVar[str]
    #: The field ``present`` divides by ``count``.
    _presented: ClassVar[str]
    result_dtype = np.dtype(np.float64)

    #: Per field of ``dtype``, whether it is an integer field (``__init_subclass__``).
    _integral: ClassVar[tuple[bool, ...]]
    #: Whether the only check of a record is that its floats are finite (``_invalid`` as here).
    _finite_only: ClassVar[bool]
    #: A record's fields, in the dtype's order (a tuple: every dtype here has several).
    _fields: ClassVar[operator.attrgetter]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "dtype" in cls.__dict__:
            cls._integral = tuple(cls.dtype[field].kind == "i" for field in cls.dtype.names)
            cls._finite_only = cls._invalid is _Record._invalid
            cls._fields = staticmethod(operator.attrgetter(*cls.dtype.names))

    # -- values and checks ---------------------------------------------------------

    def _row(self, value: Any) -> tuple:
        return self._fields(value)

    def values(self, column: np.ndarray) -> list:
        return [self.record(*row) for row in column.tolist()]

    def validate(self, value: Any, where: str = "") -> Any:
        if self._finite_only and self._exact_row(value) is not None:
            return value  # what the full check would rebuild from it, an equal record
        return self.values(self._checked([self._typed_row(value, where)], where))[0]

    def column(self, values: Iterable[Any], where: str = "") -> np.ndarray:
        if isinstance(values, np.ndarray) and values.dtype == self.dtype:
            self._check(values, where, rows=True)
            return values
        values = list(values)
        rows = [self._exact_row(v) for v in values]
        if None in rows:
            rows = [self._typed_row(v, where) for v in values]
        return self._checked(rows, where, rows=True)

    def _exact_row(self, value: Any) -> tuple | None:
        """The fields of ``value`` if it is a ``record`` whose fields already have the
        dtype's types (an ``int`` in 64 bits, a finite ``float``), else None, and
        ``_typed_row`` decides. Per message, this is most of what a check costs."""
        if type(value) is not self.record:
            return None
        row = self._row(value)
        for x, integral in zip(row, self._integral):
            if integral:
                if type(x) is not int or not _INT64_MIN <= x <= _INT64_MAX:
                    return None
            elif type(x) is not float or not math.isfinite(x):
                return None
        return row

    def _typed_row(self, value: Any, where: str) -> tuple:
        if not isinstance(value, self.record):
            raise MonoidTypeError(
                f"{self!r} takes {self.record.__name__} values, got {value!r}{_at(where)}"
            )
        row = self._row(value)
        for field, x in zip(self.dtype.names, row):
            integral = self.dtype[field].kind == "i"
            if isinstance(x, (bool, np.bool_)) or not isinstance(
                x, numbers.Integral if integral else numbers.Real
            ):
                raise MonoidTypeError(
                    f"{self!r}: {field} of {value!r}{_at(where)} must be "
                    f"{'an int' if integral else 'a float'}, not {type(x).__name__}"
                )
            if integral and not _INT64_MIN <= x <= _INT64_MAX:
                raise MonoidValueError(
                    f"{self!r}: {field} of {value!r}{_at(where)} does not fit in 64 bits"
                )
        return row

    def _checked(self, records: list[tuple], where: str, rows: bool = False) -> np.ndarray:
        column = np.array(records, dtype=self.dtype)
        self._check(column, where, rows)
        return column

    def _check(self, column: np.ndarray, where: str, rows: bool = False) -> None:
        """Raises ``MonoidValueError`` naming the first record that is no value of this monoid."""
        for reason, bad in self._invalid(column):
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                place = ", ".join(filter(None, [f"row {row}" if rows else "", where]))
                value = self.values(column[row : row + 1])[0]
                raise MonoidValueError(f"{self!r} cannot take {value!r}{_at(place)}: {reason}")

    def _invalid(self, column: np.ndarray) -> list[tuple[str, np.ndarray]]:
        """(reason, mask of the records it rejects) pairs; every float must be finite."""
        return [
            (f"{field} must be finite", ~np.isfinite(column[field]))
            for field in self.dtype.names
            if self.dtype[field].kind == "f"
        ]

    def equivalent(self, a: Any, b: Any, *, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL) -> bool:
        """Equal counts, and float fields equal within ``rel_tol`` or ``abs_tol``."""
        return all(
            x == y if self.dtype[field].kind == "i" else close(x, y, rel_tol, abs_tol)
            for field, x, y in zip(self.dtype.names, self._row(a), self._row(b))
        )

    # -- observations ----------------------------------------------------------------

    def prepare(self, x: float) -> Any:
        """The value of one observation ``x`` (a finite number)."""
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
            raise MonoidTypeError(f"{self!r} observes numbers, got {x!r}")
        return self.values(self.prepare_column(np.array([x], dtype=np.float64)))[0]

    def prepare_column(self, xs: Iterable[float]) -> np.ndarray:
        """A column holding the value of each observation in ``xs`` (finite numbers)."""
        try:
            xs = np.asarray(xs, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise MonoidTypeError(f"{self!r} observes numbers: {exc}") from None
        if xs.ndim != 1:
            raise MonoidValueError(f"{self!r} observes a 1-d array, got shape {xs.shape}")
        bad = ~np.isfinite(xs)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise MonoidValueError(f"{self!r} cannot observe {xs[row].item()!r} (row {row}): not finite")
        out = np.zeros(len(xs), dtype=self.dtype)
        out["count"] = 1
        out[self._observed] = xs
        return out

    def present_column(self, column: np.ndarray) -> np.ndarray:
        counts = column["count"]
        shown = np.full(len(column), np.nan)
        return np.divide(column[self._presented], counts, out=shown, where=counts != 0)


class Averaged(_Record, Group):
    """Mean of observations, kept as ``AveragedValue(count, total)``; a group.

    ``present`` is the mean (NaN for no observations). ``minus`` may leave negative
    counts (values taken out that were never added), which the group allows.
    """

    name = "averaged"
    dtype = np.dtype([("count", "i8"), ("total", "f8")])
    record = AveragedValue
    _observed = "total"
    _presented = "total"

    def zero(self) -> AveragedValue:
        return AveragedValue(0, 0.0)

    def plus(self, a: AveragedValue, b: AveragedValue) -> AveragedValue:
        count = checked_int(self, a.count + b.count, f"count {a.count} + {b.count}")
        return AveragedValue(count, a.total + b.total)

    def minus(self, a: AveragedValue, b: AveragedValue) -> AveragedValue:
        count = checked_int(self, a.count - b.count, f"count {a.count} - {b.count}")
        return AveragedValue(count, a.total - b.total)

    def present(self, value: AveragedValue) -> float:
        return value.mean

    def reduce_by_key(self, codes: np.ndarray, n: int, column: np.ndarray) -> np.ndarray:
        out = np.empty(n, dtype=self.dtype)
        out["count"] = int64_sums(self, codes, n, column["count"])
        out["total"] = np.bincount(codes, weights=column["total"], minlength=n)
        return out

    def plus_columns(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = np.empty(len(a), dtype=self.dtype)
        out["count"] = add_int64(self, a["count"], b["count"])
        out["total"] = a["total"] + b["total"]
        return out


def _merged(na: Any, ma: Any, qa: Any, nb: Any, mb: Any, qb: Any, n: Any) -> tuple[Any, Any]:
    """Mean and M2 of two disjoint samples merged (Chan et al.); scalars or arrays, ``n = na + nb``."""
    delta = mb - ma
    share = nb / n
    return ma + delta * share, qa + qb + delta * delta * (na * share)


class Moments(_Record):
    """Count, mean and M2 (sum of squared deviations) of observations, merged by Chan et al.

    ``present`` is the population variance (NaN for no observations); the value also
    has ``.mean`` and ``.stddev``. Not a group: a sample cannot be taken out stably.
    Values hold ``count >= 0``, ``m2 >= 0`` and ``mean == m2 == 0`` when ``count == 0``.
    """

    name = "moments"
    dtype = np.dtype([("count", "i8"), ("mean", "f8"), ("m2", "f8")])
    record = MomentsValue
    _observed = "mean"
    _presented = "m2"

    def zero(self) -> MomentsValue:
        return MomentsValue(0, 0.0, 0.0)

    def plus(self, a: MomentsValue, b: MomentsValue) -> MomentsValue:
        # The empty sample is returned as is: the formula would round the other's mean.
        if a.count == 0:
            return b
        if b.count == 0:
            return a
        count = checked_int(self, a.count + b.count, f"count {a.count} + {b.count}")
        return MomentsValue(count, *_merged(a.count, a.mean, a.m2, b.count, b.mean, b.m2, count))

    def present(self, value: MomentsValue) -> float:
        return value.variance

    def _invalid(self, column: np.ndarray) -> list[tuple[str, np.ndarray]]:
        count, mean, m2 = column["count"], column["mean"], column["m2"]
        return super()._invalid(column) + [
            ("count must be >= 0", count < 0),
            ("m2 must be >= 0", m2 < 0),
            ("an empty value must have mean 0 and m2 0", (count == 0) & ((mean != 0) | (m2 != 0))),
        ]

    def plus_columns(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        count = add_int64(self, a["count"], b["count"])
        merged = np.empty(len(a), dtype=self.dtype)
        merged["count"] = count
        with np.errstate(divide="ignore", invalid="ignore"):
            merged["mean"], merged["m2"] = _merged(
                a["count"], a["mean"], a["m2"], b["count"], b["mean"], b["m2"], count
            )
        return np.where(a["count"] == 0, b, np.where(b["count"] == 0, a, merged))

    def reduce_by_key(self, codes: np.ndarray, n: int, column: np.ndarray) -> np.ndarray:
        # Per key: mean = sum(count * mean) / N and M2 = sum(m2 + count * (mean - key mean)**2),
        # the closed form of merging all the key's records at once.
        counts = column["count"]
        weights = counts.astype(np.float64)
        out = np.zeros(n, dtype=self.dtype)
        out["count"] = int64_sums(self, codes, n, counts)
        weighted = np.bincount(codes, weights=weights * column["mean"], minlength=n)
        np.divide(weighted, out["count"], out=out["mean"], where=out["count"] != 0)
        deviation = column["mean"] - out["mean"][codes]
        out["m2"] = np.bincount(
            codes, weights=column["m2"] + weights * deviation * deviation, minlength=n
        )
        return out
