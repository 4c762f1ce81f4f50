"""The algebra: ``Monoid`` and ``Group``, their columnar fast paths and encodings.

A monoid is an associative ``plus`` with an identity ``zero``::

    plus(plus(a, b), c) == plus(a, b, c) == plus(a, plus(b, c))
    plus(zero(), a) == a == plus(a, zero())

A ``Group`` adds ``minus`` with ``plus(minus(a, b), b) == a``.

Associativity is what makes checkpointed state safe: a task may fold messages in
any grouping (per message, per micro-batch, per key group, before or after a
restart) and reach the same value. Commutativity is optional and declared by
``commutative``; a non-commutative monoid is always folded in message order.

Besides the scalar operations, every monoid works on *columns*: one-dimensional
numpy arrays of values (``dtype`` gives the array type: a number, a structured
record, or ``object``). The runtime keeps the states of many keys as columns and
updates them with ``reduce_by_key`` and ``plus_columns``; each of these must equal
the scalar fold (``monoids.laws`` checks it). Subclasses with a numeric
representation override them with vectorized numpy code; the defaults loop.

Values are never mutated by ``plus``: a new value is returned.

Every monoid encodes its values in a compact, versioned binary form (not pickle):
a header naming the monoid, its encoding version and a fingerprint of its
parameters, then the payload. Decoding bytes written by another monoid, with other
parameters or by another version raises ``EncodingError``.

``present`` turns a value into what a user reads (a count, a mean, a list of items);
``result_dtype`` says what kind of result that is. Numbers reach a sink as numbers;
every other result as JSON text (``present_json``, by default ``json_text``).

``identity()`` describes a monoid as JSON-able data (name, version, parameters) and
``from_identity`` rebuilds it, so stored state can name the monoid that reads it.
Every class that sets its own ``name`` is found by that name once its module is
imported.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import numbers
import reprlib
import struct
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

__all__ = [
    "MonoidError",
    "MonoidTypeError",
    "MonoidValueError",
    "EncodingError",
    "Monoid",
    "Group",
    "FixedWidth",
    "object_column",
    "json_text",
    "from_identity",
]

V = TypeVar("V")

_MAGIC = b"MN"
_HEADER = struct.Struct(">2sB16sHI")  # magic, kind (0 value, 1 column), name, version, params crc32

#: Classes by ``name``; redefining a class (same module and qualified name) replaces it.
_BY_NAME: dict[str, list[type[Monoid]]] = {}


def object_column(items: Sequence[Any]) -> np.ndarray:
    """A 1-d ``object`` array holding ``items`` as they are (tuples and lists stay single cells)."""
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def json_text(value: Any, what: str = "the value") -> str:
    """``value`` as compact JSON text: how a sink stores a result that is not a number.

    * ``None`` is ``null``; bools, ints and finite floats (numpy's too) are themselves;
      NaN and the infinities are ``null``, which JSON and PostgreSQL's ``jsonb`` take;
    * ``str`` is a string (not escaped to ASCII); ``bytes`` are the string of their
      base64 (RFC 4648, with padding);
    * tuples, lists and numpy arrays are arrays;
    * mappings are objects with their keys sorted as text: a ``str`` key is itself,
      any other key its JSON text (``1`` is ``"1"``, ``(1, 2)`` is ``"[1,2]"``, bytes
      their base64). A map holding both ``1`` and ``"1"`` thus repeats the key
      ``"1"``; JSON readers keep one of the two (``jsonb`` the last);
    * dataclass instances are objects of their fields, in declaration order.

    Anything else raises ``MonoidTypeError`` naming ``what``, where inside it the
    value is, and its type.
    """
    try:
        return _json(value)
    except _NoJson as exc:
        at = f" at {exc.path}" if exc.path else ""
        raise MonoidTypeError(
            f"{what} holds {type(exc.value).__name__} {reprlib.repr(exc.value)}{at}, which has no JSON form "
            "(JSON text takes None, bools, numbers, str, bytes, lists, tuples, arrays, mappings and dataclasses)"
        ) from None


class _NoJson(Exception):
    """Raised inside ``_json`` for a value without a JSON form; ``path`` grows as it unwinds."""

    def __init__(self, value: Any):
        super().__init__()
        self.value = value
        self.path = ""

    def inside(self, step: str) -> _NoJson:
        self.path = step + self.path
        return self


def _json(value: Any) -> str:
    if isinstance(value, str):
        return encode_basestring(value)
    if value is None:
        return "null"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        x = float(value)
        return repr(x) if math.isfinite(x) else "null"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    if isinstance(value, np.ndarray):
        return _json(value.tolist())
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_members(enumerate(value))) + "]"
    if isinstance(value, Mapping):
        return _object(sorted(value.items(), key=lambda item: _key(item[0])))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _object([(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)])
    raise _NoJson(value)


def _members(items: Iterable[tuple[Any, Any]]) -> list[str]:
    """The JSON text of each value of ``(where, value)``; ``where`` goes into an error's path."""
    texts = []
    for where, value in items:
        try:
            texts.append(_json(value))
        except _NoJson as exc:
            raise exc.inside(f"[{where!r}]") from None
    return texts


def _key(key: Any) -> str:
    """An object's name for ``key``: a ``str`` itself, anything else its JSON text (unquoted)."""
    if isinstance(key, str):
        return key
    text = _json(key)
    return json.loads(text) if text.startswith('"') else text


def _object(items: list[tuple[Any, Any]]) -> str:
    names = [encode_basestring(_key(key)) for key, _ in items]
    return "{" + ",".join(f"{name}:{text}" for name, text in zip(names, _members(items))) + "}"


class MonoidError(Exception):
    """Root of the errors raised by monoids."""


class MonoidTypeError(MonoidError, TypeError):
    """A value has a type the monoid cannot take."""


class MonoidValueError(MonoidError, ValueError):
    """A value has the right type but a value the monoid cannot take (NaN, out of range)."""


class EncodingError(MonoidError, ValueError):
    """Bytes cannot be decoded by this monoid: another monoid, parameters or version, or torn."""


class Monoid(ABC, Generic[V]):
    """An associative ``plus`` with an identity ``zero``.

    Subclasses implement ``zero``, ``plus``, ``_encode_payload`` and
    ``_decode_payload``, set ``name`` (at most 16 ASCII characters, unique among
    monoids) and may override the column operations with vectorized code.
    """

    #: Identifies the monoid in encoded bytes.
    name: ClassVar[str]
    #: Version of the payload encoding; bump it when the payload layout changes.
    version: ClassVar[int] = 1
    #: Whether ``plus(a, b) == plus(b, a)`` for all values.
    commutative: bool = True
    #: numpy dtype of the columns of values.
    dtype: np.dtype = np.dtype(object)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            where = (cls.__module__, cls.__qualname__)
            others = [c for c in _BY_NAME.get(cls.name, []) if (c.__module__, c.__qualname__) != where]
            _BY_NAME[cls.name] = [*others, cls]

    # -- the algebra ---------------------------------------------------------------

    @abstractmethod
    def zero(self) -> V:
        """The identity: ``plus(zero(), a) == a == plus(a, zero())``."""

    @abstractmethod
    def plus(self, a: V, b: V) -> V:
        """The associative combination of ``a`` and ``b`` (``a`` first). Mutates neither."""

    def sum(self, values: Iterable[V]) -> V:
        """Folds ``values`` in order with ``plus``, starting from ``zero()``."""
        total = self.zero()
        for value in values:
            total = self.plus(total, value)
        return total

    def params(self) -> dict[str, Any]:
        """Parameters that are part of the monoid's identity (JSON-able).

        Two monoids with different parameters never merge or decode each other's values.
        """
        return {}

    def validate(self, value: Any, where: str = "") -> V:
        """Returns ``value`` as a value of this monoid, or raises a ``MonoidError``.

        ``where`` names the place the value comes from (a key, a record position) and
        appears in the message. The default accepts anything.
        """
        return value

    def equivalent(self, a: V, b: V) -> bool:
        """Whether ``a`` and ``b`` stand for the same state (what the laws compare).

        ``==`` by default; monoids whose ``plus`` rounds (floats) or whose values have
        no useful ``==`` (sketches) override it.
        """
        return a == b

    # -- columns -------------------------------------------------------------------

    def column(self, values: Iterable[V], where: str = "") -> np.ndarray:
        """A column (1-d array of ``dtype``) holding ``values``, each validated."""
        checked = [self.validate(v, where) for v in values]
        if self.dtype == object:
            return object_column(checked)
        return np.array(checked, dtype=self.dtype)

    def values(self, column: np.ndarray) -> list[V]:
        """The values of a column, as scalar values of this monoid."""
        return list(column)

    def zeros(self, n: int) -> np.ndarray:
        """A column of ``n`` zeros (distinct objects where values are mutable)."""
        return self.column([self.zero() for _ in range(n)])

    def fold(self, column: np.ndarray) -> V:
        """Vectorized fold of a column; equals ``sum(values(column))``."""
        return self.sum(self.values(column))

    def reduce_by_key(self, codes: np.ndarray, n: int, column: np.ndarray) -> np.ndarray:
        """Folds ``column`` per key: ``out[k]`` is the fold, in row order, of the rows
        with ``codes == k`` (``zero()`` where there is none), for ``0 <= k < n``."""
        totals = [self.zero() for _ in range(n)]
        for code, value in zip(np.asarray(codes).tolist(), self.values(column)):
            totals[code] = self.plus(totals[code], value)
        return self.column(totals)

    def plus_columns(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Elementwise ``plus`` of two columns of equal length."""
        return self.column(
            [self.plus(x, y) for x, y in zip(self.values(a), self.values(b))]
        )

    # -- presentation ----------------------------------------------------------------

    #: numpy dtype of ``present``'s results (see ``json_results``).
    result_dtype: np.dtype = np.dtype(object)

    @property
    def json_results(self) -> bool:
        """Whether a sink stores the ``present_json`` text of each result rather than the
        result itself: for every ``result_dtype`` but booleans and real numbers."""
        return self.result_dtype.kind not in "biuf"

    def present(self, value: V) -> Any:
        """The value as a user reads it (a count, a mean, an estimate)."""
        return value

    def present_json(self, shown: Any) -> str:
        """JSON text of ``shown``, a result of ``present``: what a sink stores when
        ``json_results``. ``json_text`` by default; override it to store another form.
        ``check_monoid_laws`` checks that the text is JSON."""
        return json_text(shown, f"the result of {self!r}")

    def present_column(self, column: np.ndarray) -> np.ndarray:
        """``present`` applied to each value of a column, as an array of ``result_dtype``."""
        shown = [self.present(v) for v in self.values(column)]
        if self.result_dtype == object:
            return object_column(shown)
        return np.array(shown, dtype=self.result_dtype)

    # -- encoding --------------------------------------------------------------------

    @abstractmethod
    def _encode_payload(self, value: V) -> bytes:
        """The payload bytes of one value (no header)."""

    @abstractmethod
    def _decode_payload(self, data: bytes) -> V:
        """Inverse of ``_encode_payload``; raise ``EncodingError`` on malformed bytes."""

    def _encode_column_payload(self, column: np.ndarray) -> bytes:
        parts = [self._encode_payload(v) for v in self.values(column)]
        lengths = np.array([len(p) for p in parts], dtype=">u4")
        return struct.pack(">Q", len(parts)) + lengths.tobytes() + b"".join(parts)

    def _decode_column_payload(self, data: bytes) -> np.ndarray:
        try:
            (n,) = struct.unpack_from(">Q", data, 0)
            lengths = np.frombuffer(data, dtype=">u4", count=n, offset=8)
        except (struct.error, ValueError) as exc:
            raise EncodingError(f"{self!r}: column payload is truncated") from exc
        ends = 8 + 4 * n + np.cumsum(lengths, dtype=np.int64)
        expected = int(ends[-1]) if n else 8
        if expected != len(data):
            raise EncodingError(
                f"{self!r}: column payload holds {len(data)} bytes, lengths say {expected}"
            )
        starts = ends - lengths
        return self.column(
            [self._decode_payload(data[s:e]) for s, e in zip(starts.tolist(), ends.tolist())]
        )

    def _header(self, kind: int) -> bytes:
        name = self.name.encode("ascii")
        return _HEADER.pack(_MAGIC, kind, name.ljust(16, b"\0"), self.version, self.fingerprint())

    def _check_header(self, data: bytes, kind: int) -> bytes:
        if len(data) < _HEADER.size:
            raise EncodingError(f"{self!r}: {len(data)} bytes are too short for an encoded value")
        magic, found_kind, name, version, crc = _HEADER.unpack_from(data, 0)
        found = name.rstrip(b"\0").decode("ascii", "replace")
        if magic != _MAGIC:
            raise EncodingError(f"{self!r}: bytes are not an encoded monoid value")
        if found != self.name:
            raise EncodingError(f"{self!r}: bytes hold a value of monoid {found!r}, not {self.name!r}")
        if version != self.version:
            raise EncodingError(
                f"{self!r}: bytes use encoding version {version}, this monoid reads version {self.version}"
            )
        if crc != self.fingerprint():
            raise EncodingError(
                f"{self!r}: bytes were written by {self.name!r} with other parameters"
            )
        if found_kind != kind:
            raise EncodingError(f"{self!r}: expected {'a column' if kind else 'a value'}, found the other")
        return data[_HEADER.size :]

    def fingerprint(self) -> int:
        """A checksum of ``name`` and ``params()``, stored in every encoding."""
        canonical = json.dumps([self.name, self.params()], sort_keys=True, separators=(",", ":"))
        return zlib.crc32(canonical.encode())

    def encode(self, value: V) -> bytes:
        """Versioned bytes of one value; ``decode(encode(v)) == v``."""
        return self._header(0) + self._encode_payload(self.validate(value))

    def decode(self, data: bytes) -> V:
        """The value encoded in ``data`` by ``encode`` of an equal monoid."""
        return self._decode_payload(self._check_header(bytes(data), 0))

    def encode_column(self, column: np.ndarray) -> bytes:
        """Versioned bytes of a whole column (compact: numeric columns are raw arrays)."""
        return self._header(1) + self._encode_column_payload(column)

    def decode_column(self, data: bytes) -> np.ndarray:
        """The column encoded in ``data`` by ``encode_column`` of an equal monoid."""
        return self._decode_column_payload(self._check_header(bytes(data), 1))

    # -- identity --------------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        """The monoid as JSON-able data: ``name``, encoding ``version`` and ``params()``."""
        return {"name": self.name, "version": self.version, "params": self.params()}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Monoid:
        """The monoid with ``params`` (as ``params()`` returns them); ``cls(**params)`` by default.

        Override it when the constructor takes its parameters in another form.
        """
        return cls(**params)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.params() == other.params()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), json.dumps(self.params(), sort_keys=True)))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


def from_identity(identity: Mapping[str, Any]) -> Monoid:
    """The monoid that ``identity`` (from ``Monoid.identity()``) describes.

    The class is found by name among the monoids defined so far, so a monoid defined
    outside this package is found once its module is imported. Raises
    ``EncodingError`` when no class or more than one has the name, or when the
    rebuilt monoid has another version or other parameters.
    """
    try:
        name, params = identity["name"], identity["params"]
        classes = _BY_NAME.get(name, [])
    except (KeyError, TypeError):
        raise EncodingError(f"{identity!r} does not describe a monoid (needs name, version and params)") from None
    if not classes:
        raise EncodingError(f"no monoid named {name!r} is defined; import the module that defines it")
    if len(classes) > 1:
        defined = ", ".join(f"{c.__module__}.{c.__qualname__}" for c in classes)
        raise EncodingError(f"monoid name {name!r} is defined more than once ({defined}); names must be unique")
    try:
        monoid = classes[0].from_params(params)
    except (MonoidError, TypeError, ValueError, KeyError) as exc:
        raise EncodingError(f"cannot rebuild monoid {name!r} from parameters {params!r}: {exc}") from exc
    canonical = json.dumps(identity, sort_keys=True)
    if json.dumps(monoid.identity(), sort_keys=True) != canonical:
        raise EncodingError(f"{monoid!r} rebuilt from {canonical} describes itself as {monoid.identity()}")
    return monoid


class FixedWidth(Monoid[V]):
    """A monoid whose values are single records of a fixed-width numeric ``dtype``.

    Values are encoded as the raw big-endian bytes of one record, columns as their
    number of records (unsigned 64-bit) followed by the records.
    Subclasses implement ``values`` (column to scalar values) and, where a value is
    not already what numpy stores, ``_row`` (scalar value to a numpy row); they
    should vectorize ``reduce_by_key``, which ``fold`` uses.
    """

    def _row(self, value: V) -> Any:
        """``value`` as numpy takes it for one element of ``dtype`` (a number or a tuple)."""
        return value

    def fold(self, column: np.ndarray) -> V:
        """``reduce_by_key`` with a single key, so one vectorized method serves both."""
        return self.values(self.reduce_by_key(np.zeros(len(column), dtype=np.intp), 1, column))[0]

    def _encode_payload(self, value: V) -> bytes:
        return np.array([self._row(value)], dtype=self.dtype.newbyteorder(">")).tobytes()

    def _decode_payload(self, data: bytes) -> V:
        if len(data) != self.dtype.itemsize:
            raise EncodingError(
                f"{self!r}: a value takes {self.dtype.itemsize} bytes, got {len(data)}"
            )
        return self.values(self._records(data))[0]

    def _encode_column_payload(self, column: np.ndarray) -> bytes:
        records = np.ascontiguousarray(column, dtype=self.dtype.newbyteorder(">"))
        return struct.pack(">Q", len(records)) + records.tobytes()

    def _decode_column_payload(self, data: bytes) -> np.ndarray:
        if len(data) < 8:
            raise EncodingError(f"{self!r}: column payload of {len(data)} bytes is truncated")
        (n,) = struct.unpack_from(">Q", data)
        if len(data) != 8 + n * self.dtype.itemsize:
            raise EncodingError(
                f"{self!r}: column payload of {len(data)} bytes does not hold "
                f"{n} records of {self.dtype.itemsize} bytes"
            )
        return self._records(data[8:])

    def _records(self, data: bytes) -> np.ndarray:
        return np.frombuffer(data, dtype=self.dtype.newbyteorder(">")).astype(self.dtype)


class Group(Monoid[V]):
    """A monoid with inverses: ``plus(minus(a, b), b) == a``."""

    @abstractmethod
    def minus(self, a: V, b: V) -> V:
        """``a`` with ``b`` taken out. Mutates neither."""

    def negate(self, a: V) -> V:
        """The inverse of ``a``: ``plus(a, negate(a)) == zero()``."""
        return self.minus(self.zero(), a)
