"""Monoids and groups: the algebra of persistent state (depends on nothing of ours)."""

from monoids.base import Group, Monoid
from monoids.collections import First, Last, MapMonoid, Product, Timestamped
from monoids.columns import object_column
from monoids.errors import EncodingError, MonoidError, MonoidTypeError, MonoidValueError
from monoids.laws import check_laws, check_monoid_laws
from monoids.numeric import ABS_TOL, REL_TOL, Count, Max, Min, Sum
from monoids.presentation import json_text
from monoids.registry import from_identity
from monoids.sketches import CountMin, HyperLogLog, Quantiles, TopK
from monoids.stats import Averaged, AveragedValue, Moments, MomentsValue

__all__ = [
    "Monoid",
    "Group",
    "object_column",
    "json_text",
    "from_identity",
    "MonoidError",
    "MonoidTypeError",
    "MonoidValueError",
    "EncodingError",
    "Sum",
    "Count",
    "Max",
    "Min",
    "REL_TOL",
    "ABS_TOL",
    "Averaged",
    "AveragedValue",
    "Moments",
    "MomentsValue",
    "Product",
    "MapMonoid",
    "Timestamped",
    "First",
    "Last",
    "HyperLogLog",
    "CountMin",
    "TopK",
    "Quantiles",
    "check_laws",
    "check_monoid_laws",
]
