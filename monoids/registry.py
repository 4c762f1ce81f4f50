"""Monoids by name: stored state names the monoid that reads it.

``identity()`` describes a monoid as JSON-able data (its ``name``, its encoding
``version``, its ``params()``) and ``from_identity`` rebuilds it. Every class that
sets its own ``name`` is registered under it when it is defined, so a monoid defined
outside this package is found once its module is imported.

``Registered`` is mixed into ``monoids.Monoid``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from monoids.errors import EncodingError, MonoidError

__all__ = ["Registered", "from_identity"]

#: Classes by ``name``; redefining a class (same module and qualified name) replaces it.
_BY_NAME: dict[str, list[type]] = {}


class Registered:
    """A monoid's ``name`` and ``identity()``, and its rebuilding from them."""

    #: Identifies the monoid in stored state and encoded bytes: at most 16 ASCII
    #: characters, unique among monoids.
    name: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            where = (cls.__module__, cls.__qualname__)
            others = [c for c in _BY_NAME.get(cls.name, []) if (c.__module__, c.__qualname__) != where]
            _BY_NAME[cls.name] = [*others, cls]

    def identity(self) -> dict[str, Any]:
        """The monoid as JSON-able data: ``name``, encoding ``version`` and ``params()``."""
        return {"name": self.name, "version": self.version, "params": self.params()}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Any:
        """The monoid with ``params`` (as ``params()`` returns them); ``cls(**params)`` by default.

        Override it when the constructor takes its parameters in another form.
        """
        return cls(**params)


def from_identity(identity: Mapping[str, Any]) -> Any:
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
