"""How a monoid's values are stored: a compact, versioned binary form (not pickle).

Every encoding starts with a header naming the monoid, its encoding ``version`` and a
fingerprint of its parameters, then holds the payload. Decoding bytes written by
another monoid, with other parameters or by another version raises ``EncodingError``.

The payload comes from one of two codecs:

* a monoid whose ``dtype`` is a fixed-width numpy type (a number or a structured
  record) needs no code of its own: a value is the big-endian bytes of its record,
  a column the number of records (unsigned 64-bit) followed by the records;
* any other monoid gives its own ``_encode_payload`` and ``_decode_payload`` (one
  value); a column is then the number of values, their lengths and their payloads.
  Such a monoid may also override ``_encode_column_payload`` and
  ``_decode_column_payload`` with a more compact form.

A monoid that sets its ``name`` and has neither fails when its class is defined.

``Encoded`` is mixed into ``monoids.Monoid`` and uses its ``name``, ``params()``,
``validate`` and column layout (``monoids.columns``).
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any, ClassVar

import numpy as np

from monoids.errors import EncodingError, MonoidTypeError

__all__ = ["Encoded"]

_MAGIC = b"MN"
_HEADER = struct.Struct(">2sB16sHI")  # magic, kind (0 value, 1 column), name, version, params crc32
_COUNT = struct.Struct(">Q")


class Encoded:
    """``encode``/``decode`` of values and columns, framed by the monoid's header."""

    #: Version of the payload encoding; bump it when the payload layout changes.
    version: ClassVar[int] = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__ and cls.dtype.hasobject and not _own_codec(cls):
            raise MonoidTypeError(
                f"monoid {cls.__qualname__} has no codec: its values are objects (dtype {cls.dtype}); "
                "give it a fixed-width dtype, or _encode_payload and _decode_payload"
            )

    def fingerprint(self) -> int:
        """A checksum of ``name`` and ``params()``, stored in every encoding."""
        canonical = json.dumps([self.name, self.params()], sort_keys=True, separators=(",", ":"))
        return zlib.crc32(canonical.encode())

    def encode(self, value: Any) -> bytes:
        """Versioned bytes of one value; ``decode(encode(v)) == v``."""
        return self._header(0) + self._encode_payload(self.validate(value))

    def decode(self, data: bytes) -> Any:
        """The value encoded in ``data`` by ``encode`` of an equal monoid."""
        return self._decode_payload(self._check_header(bytes(data), 0))

    def encode_column(self, column: np.ndarray) -> bytes:
        """Versioned bytes of a whole column (compact: numeric columns are raw arrays)."""
        return self._header(1) + self._encode_column_payload(column)

    def decode_column(self, data: bytes) -> np.ndarray:
        """The column encoded in ``data`` by ``encode_column`` of an equal monoid."""
        return self._decode_column_payload(self._check_header(bytes(data), 1))

    # -- payloads: records for a fixed-width dtype, else the monoid's own ------------

    def _encode_payload(self, value: Any) -> bytes:
        """The payload bytes of one value (no header): its record."""
        return self.column([value]).astype(self._big_endian()).tobytes()

    def _decode_payload(self, data: bytes) -> Any:
        """Inverse of ``_encode_payload``; raises ``EncodingError`` on malformed bytes."""
        if len(data) != self.dtype.itemsize:
            raise EncodingError(f"{self!r}: a value takes {self.dtype.itemsize} bytes, got {len(data)}")
        return self.values(self._records(data))[0]

    def _encode_column_payload(self, column: np.ndarray) -> bytes:
        if not _own_codec(type(self)):
            return _COUNT.pack(len(column)) + np.ascontiguousarray(column, self._big_endian()).tobytes()
        parts = [self._encode_payload(v) for v in self.values(column)]
        lengths = np.array([len(p) for p in parts], dtype=">u4")
        return _COUNT.pack(len(parts)) + lengths.tobytes() + b"".join(parts)

    def _decode_column_payload(self, data: bytes) -> np.ndarray:
        try:
            (n,) = _COUNT.unpack_from(data, 0)
        except struct.error:
            raise EncodingError(f"{self!r}: column payload of {len(data)} bytes is truncated") from None
        if not _own_codec(type(self)):
            if len(data) != 8 + n * self.dtype.itemsize:
                raise EncodingError(
                    f"{self!r}: column payload of {len(data)} bytes does not hold "
                    f"{n} records of {self.dtype.itemsize} bytes"
                )
            return self._records(data[8:])
        try:
            lengths = np.frombuffer(data, dtype=">u4", count=n, offset=8)
        except ValueError:
            raise EncodingError(f"{self!r}: column payload is truncated") from None
        ends = 8 + 4 * n + np.cumsum(lengths, dtype=np.int64)
        expected = int(ends[-1]) if n else 8
        if expected != len(data):
            raise EncodingError(f"{self!r}: column payload holds {len(data)} bytes, lengths say {expected}")
        starts = ends - lengths
        return self.column([self._decode_payload(data[s:e]) for s, e in zip(starts.tolist(), ends.tolist())])

    def _big_endian(self) -> np.dtype:
        return self.dtype.newbyteorder(">")

    def _records(self, data: bytes) -> np.ndarray:
        return np.frombuffer(data, dtype=self._big_endian()).astype(self.dtype)

    # -- the header ------------------------------------------------------------------

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
            raise EncodingError(f"{self!r}: bytes were written by {self.name!r} with other parameters")
        if found_kind != kind:
            raise EncodingError(f"{self!r}: expected {'a column' if kind else 'a value'}, found the other")
        return data[_HEADER.size :]


def _own_codec(cls: type) -> bool:
    """Whether ``cls`` encodes its values itself rather than as fixed-width records."""
    return cls._encode_payload is not Encoded._encode_payload
