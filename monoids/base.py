"""The algebra: ``Monoid`` and ``Group``.

A monoid is an associative ``plus`` with an identity ``zero``::

    plus(plus(a, b), c) == plus(a, b, c) == plus(a, plus(b, c))
    plus(zero(), a) == a == plus(a, zero())

A ``Group`` adds ``minus`` with ``plus(minus(a, b), b) == a``.

Associativity is what makes checkpointed state safe: a task may fold messages in
any grouping (per message, per micro-batch, per key group, before or after a
restart) and reach the same value. Commutativity is optional and declared by
``commutative``; a non-commutative monoid is always folded in message order.
Values are never mutated by ``plus``: a new value is returned.

A monoid is written as algebra: ``name``, ``zero``, ``plus`` and, where they are not
the defaults, ``params``, ``validate`` and ``equivalent``. What else a monoid does
has a module of its own, each with defaults built on the algebra that a monoid
overrides only to do better:

* ``monoids.columns``: the column layout (``dtype``) and the folds over columns
  (``reduce_by_key``, ``plus_columns``), which loop over ``plus`` unless vectorized;
* ``monoids.presentation``: ``present``, what a user reads, and what a sink stores;
* ``monoids.codec``: the versioned bytes of values and columns, which follow from a
  fixed-width ``dtype`` and otherwise need ``_encode_payload`` and ``_decode_payload``;
* ``monoids.registry``: ``identity()`` and ``from_identity``, by which stored state
  names the monoid that reads it.

``monoids.laws`` checks the laws, and that each of these agrees with the algebra.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from monoids.codec import Encoded
from monoids.columns import Columns
from monoids.errors import EncodingError, MonoidError, MonoidTypeError, MonoidValueError
from monoids.presentation import Presented
from monoids.registry import Registered

__all__ = [
    "Monoid",
    "Group",
    "MonoidError",
    "MonoidTypeError",
    "MonoidValueError",
    "EncodingError",
]

V = TypeVar("V")


class Monoid(Registered, Columns, Presented, Encoded, ABC, Generic[V]):
    """An associative ``plus`` with an identity ``zero``.

    Subclasses implement ``zero`` and ``plus`` and set ``name`` (at most 16 ASCII
    characters, unique among monoids); see the module for the rest.
    """

    #: Whether ``plus(a, b) == plus(b, a)`` for all values.
    commutative: bool = True

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

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.params() == other.params()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), json.dumps(self.params(), sort_keys=True)))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


class Group(Monoid[V]):
    """A monoid with inverses: ``plus(minus(a, b), b) == a``."""

    @abstractmethod
    def minus(self, a: V, b: V) -> V:
        """``a`` with ``b`` taken out. Mutates neither."""

    def negate(self, a: V) -> V:
        """The inverse of ``a``: ``plus(a, negate(a)) == zero()``."""
        return self.minus(self.zero(), a)
