"""Approximate monoids on Apache DataSketches: ``HyperLogLog``, ``CountMin``, ``TopK``, ``Quantiles``.

Values are the library's sketch objects. ``plus`` never mutates its operands: it
merges them into a fresh sketch or union. Merging, or decoding, a sketch built with
other parameters raises ``MonoidValueError`` / ``EncodingError`` naming both sets.
The encoded payload is the library's own serialization (readable by the other
DataSketches languages).

Sketches have no useful ``==``, and some merges are only approximately associative:
HyperLogLog switches estimators once sketches of several streams are merged, frequent
items purge their smallest counters when full, KLL compacts with random offsets. So
each monoid's ``equivalent(a, b)`` says whether two sketches describe the same stream
within the sketch's guarantees; the law checks use it.

What each presents, and so what a sink stores (numbers as numbers, the rest as JSON
text): ``HyperLogLog`` the distinct-count estimate; ``CountMin`` the total weight (an
item's frequency is ``estimate(value, item)``); ``TopK`` the frequent items, most
frequent first (a JSON array of strings); ``Quantiles`` the quantile at its one rank,
or an object from each of its ranks to the quantile there.

``prepare(item)`` is the sketch of one item, ``prepare_column(items)`` a column of
those, and ``prepare_by_key(codes, n, items)`` sketches raw items per key directly
(equivalent to ``reduce_by_key(codes, n, prepare_column(items))``, without building
one sketch per item).
"""

from __future__ import annotations

import copy
import math
import numbers
import reprlib
from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

import datasketches
import numpy as np

from monoids.base import EncodingError, Monoid, MonoidTypeError, MonoidValueError
from monoids.columns import object_column
from monoids.collections import Item, check_item

__all__ = ["HyperLogLog", "CountMin", "TopK", "Quantiles"]

_FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Ranks at which ``Quantiles.equivalent`` compares two distributions.
_RANKS = [i / 20 for i in range(21)]


def _at(where: str) -> str:
    return f" at {where}" if where else ""


def _show(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


class _Sketch(Monoid):
    """Shared code: values are ``_sketch`` objects, merged through an accumulator.

    Subclasses give ``_new`` (an empty sketch), ``_params_of`` (the parameters a sketch
    was built with, keyed like ``params()``) and the item kinds; they override the
    accumulator hooks where merging is not ``acc.merge(sketch)`` into a fresh sketch.
    """

    dtype = np.dtype(object)
    _sketch: ClassVar[type]
    #: Item kinds ``prepare`` takes (a subset of str, int, float).
    _items: ClassVar[tuple[type, ...]]

    @abstractmethod
    def _new(self) -> Any:
        """An empty sketch with this monoid's parameters."""

    @abstractmethod
    def _params_of(self, sketch: Any) -> dict[str, Any]:
        """The parameters ``sketch`` was built with, keyed like ``params()``."""

    def _serialize(self, sketch: Any) -> bytes:
        return sketch.serialize()

    def _size(self, sketch: Any) -> int:
        """Length of ``_serialize(sketch)``."""
        return sketch.get_serialized_size_bytes()

    def _accumulator(self) -> Any:
        """A mutable object to merge sketches and items into (a fresh sketch by default)."""
        return self._new()

    def _absorb(self, acc: Any, sketch: Any) -> None:
        acc.merge(sketch)

    def _result(self, acc: Any) -> Any:
        return acc

    def _check_params(self) -> None:
        """Builds one sketch so that the library rejects bad parameters at construction."""
        for key, value in self.params().items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise MonoidTypeError(f"{self!r}: {key} must be an int, got {value!r}")
        try:
            self._new()
        except (ValueError, TypeError) as exc:
            raise MonoidValueError(f"{self!r}: invalid parameters: {exc}") from None

    # -- the algebra -------------------------------------------------------------------

    def zero(self) -> Any:
        return self._new()

    def plus(self, a: Any, b: Any) -> Any:
        return self.sum((a, b))

    def sum(self, values: Iterable[Any]) -> Any:
        values = list(values)
        return self.reduce_by_key(np.zeros(len(values), dtype=np.intp), 1, values)[0]

    def fold(self, column: np.ndarray) -> Any:
        return self.sum(column)

    def reduce_by_key(self, codes: np.ndarray, n: int, column: Sequence[Any]) -> np.ndarray:
        return self._by_key(
            codes, n, column, lambda acc, row, i: self._absorb(acc, self.validate(row, f"row {i}"))
        )

    def prepare_by_key(self, codes: np.ndarray, n: int, items: Sequence[Any]) -> np.ndarray:
        """A column of ``n`` sketches: ``out[k]`` holds the ``items`` whose code is ``k``."""
        return self._by_key(
            codes, n, items, lambda acc, item, i: acc.update(self._item(item, f"row {i}"))
        )

    def _by_key(
        self,
        codes: np.ndarray,
        n: int,
        rows: Sequence[Any],
        feed: Callable[[Any, Any, int], None],
    ) -> np.ndarray:
        accumulators: dict[int, Any] = {}
        for i, (code, row) in enumerate(zip(np.asarray(codes).tolist(), rows)):
            if code not in accumulators:
                accumulators[code] = self._accumulator()
            feed(accumulators[code], row, i)
        return object_column(
            [self._result(accumulators[k]) if k in accumulators else self.zero() for k in range(n)]
        )

    def validate(self, value: Any, where: str = "") -> Any:
        if not isinstance(value, self._sketch):
            raise MonoidTypeError(
                f"{self!r} takes {self._sketch.__name__} values, "
                f"got {type(value).__name__} {reprlib.repr(value)}{_at(where)}"
            )
        found = self._params_of(value)
        if found != self.params():
            raise MonoidValueError(
                f"{self!r} cannot merge a sketch built with {_show(found)}{_at(where)}: "
                f"it uses {_show(self.params())}"
            )
        return value

    # -- items -------------------------------------------------------------------------

    def _item(self, item: Any, where: str = "") -> Item:
        return check_item(self, item, self._items, where)

    def prepare(self, item: Any) -> Any:
        """The sketch of the single ``item``."""
        return self.prepare_by_key(np.zeros(1, dtype=np.intp), 1, [item])[0]

    def prepare_column(self, items: Iterable[Any]) -> np.ndarray:
        """A column holding the sketch of each of ``items``."""
        return object_column([self.prepare(item) for item in items])

    # -- encoding ----------------------------------------------------------------------

    def _encode_payload(self, value: Any) -> bytes:
        return self._serialize(value)

    def _decode_payload(self, data: bytes) -> Any:
        try:
            sketch = self._sketch.deserialize(data)
        except (ValueError, RuntimeError, IndexError, TypeError) as exc:
            raise EncodingError(f"{self!r}: payload is no {self._sketch.__name__}: {exc}") from None
        # The library does not notice bytes after a sketch, nor all truncations.
        if self._size(sketch) != len(data):
            raise EncodingError(
                f"{self!r}: payload holds {len(data)} bytes, the sketch in it {self._size(sketch)}"
            )
        found = self._params_of(sketch)
        if found != self.params():
            raise EncodingError(
                f"{self!r}: decoded a sketch built with {_show(found)}, expected {_show(self.params())}"
            )
        return sketch


class HyperLogLog(_Sketch):
    """Distinct count of str, int and float items (``1`` and ``1.0`` are distinct items).

    Relative standard error about ``1.04 / sqrt(2**lg_k)`` (1.6% for ``lg_k=12``).
    ``present`` is the estimate. Results are stored as HLL_4 sketches.

    The same items merged in different groupings can give somewhat different
    estimates (the sketch switches modes and estimators), so ``equivalent`` asks for
    the same ``lg_k`` and overlapping bounds at two standard deviations (equal counts
    while the sketches are small enough to count exactly).
    """

    name = "hyperloglog"
    _sketch = datasketches.hll_sketch
    _items = (str, int, float)
    result_dtype = np.dtype(np.float64)

    def __init__(self, lg_k: int = 12):
        self.lg_k = lg_k
        self._check_params()

    def params(self) -> dict[str, Any]:
        return {"lg_k": self.lg_k}

    def _new(self) -> datasketches.hll_sketch:
        return datasketches.hll_sketch(self.lg_k, datasketches.HLL_4)

    def _params_of(self, sketch: datasketches.hll_sketch) -> dict[str, Any]:
        return {"lg_k": sketch.lg_config_k}

    def _serialize(self, sketch: datasketches.hll_sketch) -> bytes:
        return sketch.serialize_compact()

    def _size(self, sketch: datasketches.hll_sketch) -> int:
        return sketch.get_compact_serialization_bytes()

    def _accumulator(self) -> datasketches.hll_union:
        return datasketches.hll_union(self.lg_k)

    def _absorb(self, acc: datasketches.hll_union, sketch: datasketches.hll_sketch) -> None:
        acc.update(sketch)

    def _result(self, acc: datasketches.hll_union) -> datasketches.hll_sketch:
        return acc.get_result(datasketches.HLL_4)

    def present(self, value: datasketches.hll_sketch) -> float:
        return value.get_estimate()

    def equivalent(self, a: datasketches.hll_sketch, b: datasketches.hll_sketch) -> bool:
        return (
            a.lg_config_k == b.lg_config_k
            and a.is_empty() == b.is_empty()
            and a.get_lower_bound(2) <= b.get_upper_bound(2)
            and b.get_lower_bound(2) <= a.get_upper_bound(2)
        )


class CountMin(_Sketch):
    """Frequencies of str and int items; estimates never undercount.

    With total weight ``W``, an estimate exceeds the true count by at most
    ``e / num_buckets * W`` with probability ``1 - exp(-num_hashes)``. ``present`` is
    the total weight (the number of items); ``estimate(value, item)`` is an item's
    frequency. Merges add counters, so they are exact: ``equivalent`` compares the
    serialized counters. Memory: ``num_hashes * num_buckets`` doubles per sketch of a
    non-empty stream.

    The library's Python binding reads back only sketches built with its default
    seed 9001, so that is the only ``seed`` accepted.
    """

    name = "count_min"
    _sketch = datasketches.count_min_sketch
    _items = (str, int)
    result_dtype = np.dtype(np.float64)
    DEFAULT_SEED: ClassVar[int] = 9001

    def __init__(self, num_hashes: int = 5, num_buckets: int = 2048, seed: int = DEFAULT_SEED):
        self.num_hashes = num_hashes
        self.num_buckets = num_buckets
        self.seed = seed
        self._check_params()
        if seed != self.DEFAULT_SEED:
            raise MonoidValueError(
                f"{self!r}: datasketches' Python binding decodes only seed {self.DEFAULT_SEED}"
            )
        if not 1 <= num_hashes <= 255:
            raise MonoidValueError(f"{self!r}: num_hashes must be in 1..255")

    def params(self) -> dict[str, Any]:
        return {"num_hashes": self.num_hashes, "num_buckets": self.num_buckets, "seed": self.seed}

    def _new(self) -> datasketches.count_min_sketch:
        return datasketches.count_min_sketch(self.num_hashes, self.num_buckets, self.seed)

    def _params_of(self, sketch: datasketches.count_min_sketch) -> dict[str, Any]:
        return {"num_hashes": sketch.num_hashes, "num_buckets": sketch.num_buckets, "seed": sketch.seed}

    def present(self, value: datasketches.count_min_sketch) -> float:
        return value.total_weight

    def estimate(self, value: datasketches.count_min_sketch, item: str | int) -> float:
        """Estimated frequency of ``item``: at least its true frequency."""
        return self.validate(value).get_estimate(self._item(item))

    def equivalent(self, a: datasketches.count_min_sketch, b: datasketches.count_min_sketch) -> bool:
        return a.serialize() == b.serialize()


class TopK(_Sketch):
    """Most frequent strings (Misra-Gries frequent items, up to ``0.75 * 2**lg_max_k``
    tracked at once).

    ``present`` lists the items surely above the sketch's error (all items while
    fewer than the capacity were seen), most frequent first. Once full, merges purge
    counters depending on the order, so ``equivalent`` asks that every tracked item's
    lower bounds agree within the sum of both sketches' maximum errors.

    Limitation of the library: a sketch whose counters were all purged (typical of a
    long tail of items seen once) counts as empty, and merging or serializing it drops
    its total weight and error offset. Lower bounds, and so ``present``, stay valid;
    upper bounds and the total weight may then undercount.
    """

    name = "top_k"
    _sketch = datasketches.frequent_strings_sketch
    _items = (str,)
    result_dtype = np.dtype(object)

    def __init__(self, lg_max_k: int = 8):
        self.lg_max_k = lg_max_k
        self._check_params()

    def params(self) -> dict[str, Any]:
        return {"lg_max_k": self.lg_max_k}

    def _new(self) -> datasketches.frequent_strings_sketch:
        return datasketches.frequent_strings_sketch(self.lg_max_k)

    def _params_of(self, sketch: datasketches.frequent_strings_sketch) -> dict[str, Any]:
        # The binding exposes only epsilon, which is 3.5 / 2**lg_max_k.
        return {"lg_max_k": round(math.log2(3.5 / sketch.epsilon))}

    def present(self, value: datasketches.frequent_strings_sketch) -> list[str]:
        rows = value.get_frequent_items(datasketches.NO_FALSE_POSITIVES)
        return [item for item, *_ in sorted(rows, key=lambda row: (-row[1], row[0]))]

    def equivalent(
        self, a: datasketches.frequent_strings_sketch, b: datasketches.frequent_strings_sketch
    ) -> bool:
        items = {
            row[0] for s in (a, b) for row in s.get_frequent_items(datasketches.NO_FALSE_NEGATIVES)
        }
        error = _error(a) + _error(b)
        return all(abs(a.get_lower_bound(x) - b.get_lower_bound(x)) <= error for x in items)


def _error(sketch: datasketches.frequent_strings_sketch) -> int:
    """The sketch's maximum error: the width of any item's [lower, upper] bounds."""
    return sketch.get_upper_bound("") - sketch.get_lower_bound("")


class Quantiles(_Sketch):
    """Quantiles of numbers (KLL, stored as 32-bit floats: about 7 significant digits).

    Normalized rank error about 1.65% for ``k=200``. ``present`` gives the quantiles
    at ``ranks`` (normalized ranks in [0, 1]; the median by default): with one rank a
    float (NaN for an empty sketch), with several a dict from rank to quantile (JSON
    text at a sink: ``{"0.5":12.0,"0.99":80.5}``, ``null`` where empty).
    ``quantile(value, q)`` gives any other. The ranks only choose what is presented:
    they are no part of ``params()``, so the same checkpoints serve any ranks (and
    ``persistent inspect``, which knows only the checkpoints, shows the median).

    KLL compaction is random, so ``equivalent`` asks for the same count, min and max
    and cumulative distributions within both sketches' rank errors (exactly equal
    below ``k`` items).
    """

    name = "quantiles"
    _sketch = datasketches.kll_floats_sketch
    _items = (int, float)

    def __init__(self, k: int = 200, ranks: Iterable[float] = (0.5,)):
        self.k = k
        self._check_params()
        if isinstance(ranks, (str, bytes)) or not isinstance(ranks, Iterable):
            raise MonoidTypeError(f"{self!r}: ranks must be a sequence of numbers, e.g. (0.5, 0.99); got {ranks!r}")
        self.ranks = tuple(self._rank(q) for q in ranks)
        if not self.ranks:
            raise MonoidValueError(f"{self!r}: ranks must name at least one rank")
        if len(set(self.ranks)) < len(self.ranks):
            raise MonoidValueError(f"{self!r}: ranks {self.ranks!r} name a rank twice")
        self.result_dtype = np.dtype(np.float64) if len(self.ranks) == 1 else np.dtype(object)

    def params(self) -> dict[str, Any]:
        return {"k": self.k}

    def _new(self) -> datasketches.kll_floats_sketch:
        return datasketches.kll_floats_sketch(self.k)

    def _params_of(self, sketch: datasketches.kll_floats_sketch) -> dict[str, Any]:
        return {"k": sketch.k}

    def _serialize(self, sketch: datasketches.kll_floats_sketch) -> bytes:
        # Queries sort a sketch's newest level in place, which changes its bytes; encode
        # a sorted copy so that the bytes depend neither on queries nor on the input.
        canonical = copy.copy(sketch)
        if not canonical.is_empty():
            canonical.get_rank(canonical.get_min_value())
        return canonical.serialize()

    def _size(self, sketch: datasketches.kll_floats_sketch) -> int:
        return len(self._serialize(sketch))

    def _item(self, item: Any, where: str = "") -> float:
        x = float(super()._item(item, where))
        if not -_FLOAT32_MAX <= x <= _FLOAT32_MAX:
            raise MonoidValueError(f"{self!r}: {item!r}{_at(where)} does not fit in a 32-bit float")
        return x

    def present(self, value: datasketches.kll_floats_sketch) -> float | dict[float, float]:
        if len(self.ranks) == 1:
            return self.quantile(value, self.ranks[0])
        return {q: self.quantile(value, q) for q in self.ranks}

    def quantile(self, value: datasketches.kll_floats_sketch, q: float) -> float:
        """The item at normalized rank ``q`` (0 the minimum, 1 the maximum); NaN if empty."""
        q = self._rank(q)
        value = self.validate(value)
        return math.nan if value.is_empty() else value.get_quantile(q)

    def _rank(self, q: Any) -> float:
        if isinstance(q, (bool, np.bool_)) or not isinstance(q, numbers.Real):
            raise MonoidTypeError(f"{self!r}: a rank is a number in [0, 1], got {q!r}")
        if not 0 <= q <= 1:
            raise MonoidValueError(f"{self!r}: rank {q!r} is not in [0, 1]")
        return float(q)

    def equivalent(self, a: datasketches.kll_floats_sketch, b: datasketches.kll_floats_sketch) -> bool:
        if (a.k, a.n) != (b.k, b.n):
            return False
        if a.is_empty():
            return True
        if (a.get_min_value(), a.get_max_value()) != (b.get_min_value(), b.get_max_value()):
            return False
        points = sorted(set(a.get_quantiles(_RANKS)) | set(b.get_quantiles(_RANKS)))
        tolerance = sum(s.normalized_rank_error(False) for s in (a, b) if s.is_estimation_mode())
        return all(
            abs(x - y) <= tolerance for x, y in zip(a.get_cdf(points), b.get_cdf(points))
        )
