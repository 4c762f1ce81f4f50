"""The errors monoids raise: one root, each also the builtin error it stands for."""

from __future__ import annotations

__all__ = ["MonoidError", "MonoidTypeError", "MonoidValueError", "EncodingError"]


class MonoidError(Exception):
    """Root of the errors raised by monoids."""


class MonoidTypeError(MonoidError, TypeError):
    """A value has a type the monoid cannot take."""


class MonoidValueError(MonoidError, ValueError):
    """A value has the right type but a value the monoid cannot take (NaN, out of range)."""


class EncodingError(MonoidError, ValueError):
    """Bytes cannot be decoded by this monoid: another monoid, parameters or version, or torn."""
