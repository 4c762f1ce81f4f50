"""Settings chosen from a fixed set: an enum whose values are what a user writes."""

from __future__ import annotations

import enum
from typing import TypeVar

from persistent.core.errors import ConfigError

__all__ = ["Choice"]

C = TypeVar("C", bound="Choice")


class Choice(enum.Enum):
    """An enum of the choices of a setting; each member's value is the choice as a user
    writes it (in code, on the command line or in an environment variable)."""

    @classmethod
    def of(cls: type[C], value: C | str, where: str) -> C:
        """``value``, a member or its value, as a member; anything else is a
        ``ConfigError`` naming ``where`` (the setting) and the choices."""
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(repr(member.value) for member in cls)
            raise ConfigError(f"{where} must be one of {choices}, got {value!r}") from None
