"""Monoids built from other monoids or holding plain items.

``Product`` combines monoids componentwise on tuples; ``MapMonoid`` merges dicts key
by key; ``First`` and ``Last`` keep the item with the earliest or latest timestamp.

Items (``First``/``Last`` items, ``MapMonoid`` keys) are encoded with a type tag, never
pickled: ``str`` (UTF-8), ``int`` (64-bit), ``float`` (not NaN) and, for items,
``bytes``.
"""

from __future__ import annotations

import math
import numbers
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from monoids.base import EncodingError, Monoid, MonoidTypeError, MonoidValueError
from monoids.columns import object_column
from monoids.registry import from_identity

__all__ = ["Product", "MapMonoid", "Timestamped", "First", "Last"]

Item = str | int | float | bytes

_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")
_INT64 = np.iinfo(np.int64)


def _at(where: str) -> str:
    return f" at {where}" if where else ""


def _check_monoid(owner: str, monoid: Any) -> Monoid:
    if not isinstance(monoid, Monoid):
        raise MonoidTypeError(f"{owner} takes monoids, got {monoid!r}")
    return monoid


def check_item(owner: Monoid, item: Any, kinds: tuple[type, ...], where: str) -> Item:
    """``item`` normalized to one of ``kinds`` (a subset of str, int, float, bytes), or raises."""
    if isinstance(item, (bool, np.bool_)):
        kind = None
    elif isinstance(item, numbers.Integral):
        kind = int
    elif isinstance(item, numbers.Real):
        kind = float
    else:
        kind = next((k for k in (str, bytes) if isinstance(item, k)), None)
    if kind not in kinds:
        names = ", ".join(k.__name__ for k in kinds)
        raise MonoidTypeError(f"{owner!r} takes {names}, got {item!r}{_at(where)}")
    if kind is int and not _INT64.min <= item <= _INT64.max:
        raise MonoidValueError(f"{owner!r}: {item!r}{_at(where)} does not fit in 64 bits")
    if kind is float and math.isnan(item):
        raise MonoidValueError(f"{owner!r} cannot take NaN{_at(where)}")
    if kind is str:
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            raise MonoidValueError(f"{owner!r}: {item!r}{_at(where)} is not valid Unicode") from None
    return kind(item)


def _chunk(data: bytes) -> bytes:
    return _U32.pack(len(data)) + data


def _encode_item(item: Item) -> bytes:
    if isinstance(item, str):
        return b"s" + _chunk(item.encode("utf-8"))
    if isinstance(item, bytes):
        return b"b" + _chunk(item)
    if isinstance(item, int):
        return b"i" + _I64.pack(item)
    return b"f" + _F64.pack(item)


class _Reader:
    """Reads a payload field by field; raises ``EncodingError`` naming ``owner`` when torn."""

    def __init__(self, owner: Monoid, data: bytes):
        self.owner = owner
        self.data = data
        self.pos = 0

    def take(self, size: int) -> bytes:
        end = self.pos + size
        if end > len(self.data):
            raise EncodingError(
                f"{self.owner!r}: payload of {len(self.data)} bytes is truncated "
                f"(needs {end} bytes at least)"
            )
        chunk, self.pos = self.data[self.pos : end], end
        return chunk

    def unpack(self, fmt: struct.Struct) -> Any:
        return fmt.unpack(self.take(fmt.size))[0]

    def chunk(self) -> bytes:
        return self.take(self.unpack(_U32))

    def item(self) -> Item:
        tag = self.take(1)
        if tag == b"s":
            try:
                return self.chunk().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise EncodingError(f"{self.owner!r}: a text item is not UTF-8: {exc}") from None
        if tag == b"b":
            return self.chunk()
        if tag == b"i":
            return self.unpack(_I64)
        if tag == b"f":
            return self.unpack(_F64)
        raise EncodingError(f"{self.owner!r}: unknown item tag {tag!r} at byte {self.pos - 1}")

    def end(self) -> None:
        if self.pos != len(self.data):
            raise EncodingError(
                f"{self.owner!r}: {len(self.data) - self.pos} bytes left over after the payload"
            )


class Product(Monoid[tuple]):
    """Tuples combined componentwise: ``plus(a, b)[i] == monoids[i].plus(a[i], b[i])``.

    Commutative iff every component is. Columns hold tuples; the column operations
    split them into one column per component and use the components' (vectorized)
    column operations.
    """

    name = "product"

    def __init__(self, *monoids: Monoid):
        if not monoids:
            raise MonoidValueError("Product needs at least one monoid")
        self.monoids = tuple(_check_monoid("Product", m) for m in monoids)
        self.commutative = all(m.commutative for m in self.monoids)

    def params(self) -> dict[str, Any]:
        return {"monoids": [m.identity() for m in self.monoids]}

    @classmethod
    def from_params(cls, params):
        return cls(*map(from_identity, params["monoids"]))

    def __repr__(self) -> str:
        return f"Product({', '.join(map(repr, self.monoids))})"

    def zero(self) -> tuple:
        return tuple(m.zero() for m in self.monoids)

    def plus(self, a: tuple, b: tuple) -> tuple:
        return tuple(m.plus(x, y) for m, x, y in zip(self.monoids, a, b))

    def validate(self, value: Any, where: str = "") -> tuple:
        if not isinstance(value, tuple) or len(value) != len(self.monoids):
            raise MonoidTypeError(
                f"{self!r} takes tuples of {len(self.monoids)} values, got {value!r}{_at(where)}"
            )
        return tuple(
            m.validate(x, f"{where}[{i}]") for i, (m, x) in enumerate(zip(self.monoids, value))
        )

    def equivalent(self, a: tuple, b: tuple) -> bool:
        return all(m.equivalent(x, y) for m, x, y in zip(self.monoids, a, b))

    def present(self, value: tuple) -> tuple:
        return tuple(m.present(x) for m, x in zip(self.monoids, value))

    # -- columns: one per component ----------------------------------------------------

    def _split(self, column: np.ndarray) -> list[np.ndarray]:
        rows = self.values(column)
        return [m.column([row[i] for row in rows]) for i, m in enumerate(self.monoids)]

    def _join(self, parts: list[np.ndarray]) -> np.ndarray:
        return object_column(list(zip(*(m.values(p) for m, p in zip(self.monoids, parts)))))

    def fold(self, column: np.ndarray) -> tuple:
        return tuple(m.fold(p) for m, p in zip(self.monoids, self._split(column)))

    def reduce_by_key(self, codes: np.ndarray, n: int, column: np.ndarray) -> np.ndarray:
        return self._join(
            [m.reduce_by_key(codes, n, p) for m, p in zip(self.monoids, self._split(column))]
        )

    def plus_columns(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self._join(
            [
                m.plus_columns(x, y)
                for m, x, y in zip(self.monoids, self._split(a), self._split(b))
            ]
        )

    # -- encoding: length-prefixed component payloads ----------------------------------

    def _encode_payload(self, value: tuple) -> bytes:
        return b"".join(_chunk(m._encode_payload(x)) for m, x in zip(self.monoids, value))

    def _decode_payload(self, data: bytes) -> tuple:
        reader = _Reader(self, data)
        value = tuple(m._decode_payload(reader.chunk()) for m in self.monoids)
        reader.end()
        return value

    def _encode_column_payload(self, column: np.ndarray) -> bytes:
        return b"".join(
            _chunk(m._encode_column_payload(p)) for m, p in zip(self.monoids, self._split(column))
        )

    def _decode_column_payload(self, data: bytes) -> np.ndarray:
        reader = _Reader(self, data)
        parts = [m._decode_column_payload(reader.chunk()) for m in self.monoids]
        reader.end()
        if len({len(p) for p in parts}) > 1:
            raise EncodingError(
                f"{self!r}: component columns differ in length: {[len(p) for p in parts]}"
            )
        return self._join(parts)


class MapMonoid(Monoid[dict]):
    """Dicts merged key by key: ``plus(a, b)[k]`` is ``value_monoid.plus(a[k], b[k])``
    where both have ``k``, else the one value there is. ``zero()`` is ``{}``.

    Keys are ``str`` or 64-bit ``int``. Commutative iff ``value_monoid`` is. Encoded
    in a fixed key order (ints, then strings, each ascending).
    """

    name = "map"

    def __init__(self, value_monoid: Monoid):
        self.value_monoid = _check_monoid("MapMonoid", value_monoid)
        self.commutative = value_monoid.commutative

    def params(self) -> dict[str, Any]:
        return {"values": self.value_monoid.identity()}

    @classmethod
    def from_params(cls, params):
        return cls(from_identity(params["values"]))

    def __repr__(self) -> str:
        return f"MapMonoid({self.value_monoid!r})"

    def zero(self) -> dict:
        return {}

    def plus(self, a: dict, b: dict) -> dict:
        merged = dict(a)
        for key, value in b.items():
            merged[key] = self.value_monoid.plus(merged[key], value) if key in merged else value
        return merged

    def validate(self, value: Any, where: str = "") -> dict:
        if not isinstance(value, Mapping):
            raise MonoidTypeError(f"{self!r} takes dicts, got {value!r}{_at(where)}")
        checked = {}
        for key, v in value.items():
            key = check_item(self, key, (str, int), f"{where} key {key!r}".strip())
            checked[key] = self.value_monoid.validate(v, f"{where}[{key!r}]")
        return checked

    def equivalent(self, a: dict, b: dict) -> bool:
        return a.keys() == b.keys() and all(self.value_monoid.equivalent(a[k], b[k]) for k in a)

    def present(self, value: dict) -> dict:
        return {k: self.value_monoid.present(v) for k, v in value.items()}

    def _encode_payload(self, value: dict) -> bytes:
        keys = sorted(value, key=lambda k: (isinstance(k, str), k))
        return _U32.pack(len(keys)) + b"".join(
            _encode_item(k) + _chunk(self.value_monoid._encode_payload(value[k])) for k in keys
        )

    def _decode_payload(self, data: bytes) -> dict:
        reader = _Reader(self, data)
        out = {}
        for _ in range(reader.unpack(_U32)):
            key = reader.item()
            if not isinstance(key, (str, int)) or key in out:
                raise EncodingError(f"{self!r}: bad or repeated key {key!r} in the payload")
            out[key] = self.value_monoid._decode_payload(reader.chunk())
        reader.end()
        return out


@dataclass(frozen=True, slots=True)
class Timestamped:
    """``item`` seen at ``timestamp_ms`` (milliseconds since the epoch, 64-bit)."""

    timestamp_ms: int
    item: Item


class _ByTimestamp(Monoid[Timestamped | None]):
    """Keeps one ``Timestamped`` by timestamp; ``zero()`` is ``None``. Not commutative:
    on equal timestamps the operand's position decides."""

    commutative = False
    #: Whether the later timestamp wins (``Last``) rather than the earlier (``First``).
    _later_wins: ClassVar[bool]

    def zero(self) -> None:
        return None

    def plus(self, a: Timestamped | None, b: Timestamped | None) -> Timestamped | None:
        if a is None:
            return b
        if b is None:
            return a
        if self._later_wins:
            return b if b.timestamp_ms >= a.timestamp_ms else a
        return b if b.timestamp_ms < a.timestamp_ms else a

    def validate(self, value: Any, where: str = "") -> Timestamped | None:
        if value is None:
            return None
        if not isinstance(value, Timestamped):
            raise MonoidTypeError(f"{self!r} takes Timestamped or None, got {value!r}{_at(where)}")
        ts = value.timestamp_ms
        if isinstance(ts, (bool, np.bool_)) or not isinstance(ts, numbers.Integral):
            raise MonoidTypeError(
                f"{self!r}: timestamp_ms of {value!r}{_at(where)} must be an int, not {type(ts).__name__}"
            )
        if not _INT64.min <= ts <= _INT64.max:
            raise MonoidValueError(f"{self!r}: timestamp_ms of {value!r}{_at(where)} does not fit in 64 bits")
        item = check_item(self, value.item, (str, int, float, bytes), f"{where} item".strip())
        return Timestamped(int(ts), item)

    def present(self, value: Timestamped | None) -> Item | None:
        return None if value is None else value.item

    def reduce_by_key(self, codes: np.ndarray, n: int, column: np.ndarray) -> np.ndarray:
        # Sorting the rows by (key, timestamp, row) puts each key's winner first (First:
        # earliest, leftmost on ties) or last (Last: latest, rightmost on ties).
        out = object_column([None] * n)
        values = self.values(column)
        rows = np.array([i for i, v in enumerate(values) if v is not None], dtype=np.intp)
        if not len(rows):
            return out
        keys = np.asarray(codes)[rows]
        stamps = np.array([values[i].timestamp_ms for i in rows], dtype=np.int64)
        order = np.lexsort((rows, stamps, keys))
        sorted_keys = keys[order]
        boundary = sorted_keys[1:] != sorted_keys[:-1]
        if self._later_wins:
            winners = order[np.append(boundary, True)]
        else:
            winners = order[np.insert(boundary, 0, True)]
        out[keys[winners]] = column[rows[winners]]
        return out

    # Payload: a presence byte (0 for None), then the timestamp and the tagged item.

    def _encode_payload(self, value: Timestamped | None) -> bytes:
        if value is None:
            return b"\0"
        return b"\1" + _I64.pack(value.timestamp_ms) + _encode_item(value.item)

    def _decode_payload(self, data: bytes) -> Timestamped | None:
        reader = _Reader(self, data)
        value = None if reader.take(1) == b"\0" else Timestamped(reader.unpack(_I64), reader.item())
        reader.end()
        return value


class First(_ByTimestamp):
    """The item with the smallest ``timestamp_ms``; on ties the left operand's (earlier message)."""

    name = "first"
    _later_wins = False


class Last(_ByTimestamp):
    """The item with the largest ``timestamp_ms``; on ties the right operand's (later message)."""

    name = "last"
    _later_wins = True
