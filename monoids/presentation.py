"""What a user reads of a monoid's values: ``present``, and the JSON text a sink stores.

``present`` turns a value into a result (a count, a mean, a list of items);
``result_dtype`` says what kind of result that is. Numbers reach a sink as numbers;
every other result as JSON text (``present_json``, by default ``json_text``).

``Presented`` is mixed into ``monoids.Monoid``; it reads columns through the
monoid's ``values``.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import numbers
import reprlib
from collections.abc import Iterable, Mapping
from json.encoder import encode_basestring
from typing import Any

import numpy as np

from monoids.columns import object_column
from monoids.errors import MonoidTypeError

__all__ = ["Presented", "json_text"]


class Presented:
    """``present`` and its column and JSON forms."""

    #: numpy dtype of ``present``'s results (see ``json_results``).
    result_dtype: np.dtype = np.dtype(object)

    @property
    def json_results(self) -> bool:
        """Whether a sink stores the ``present_json`` text of each result rather than the
        result itself: for every ``result_dtype`` but booleans and real numbers."""
        return self.result_dtype.kind not in "biuf"

    def present(self, value: Any) -> Any:
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
