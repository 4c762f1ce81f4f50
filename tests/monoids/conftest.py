"""Shared hypothesis strategies, as fixtures, for the monoid tests."""

import hypothesis.strategies as st
import pytest

from monoids import Timestamped


@pytest.fixture
def small_ints() -> st.SearchStrategy[int]:
    """Integers whose sums, a dozen at a time, stay within 64 bits."""
    return st.integers(-(2**40), 2**40)


@pytest.fixture
def floats() -> st.SearchStrategy[float]:
    """Floats whose sums round by less than the default ABS_TOL."""
    return st.floats(-1e3, 1e3, allow_nan=False)


@pytest.fixture
def items() -> st.SearchStrategy:
    """Every kind of item ``First``/``Last`` take."""
    return st.one_of(
        st.text(max_size=8),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False),
        st.binary(max_size=8),
    )


@pytest.fixture
def timestamped(items) -> st.SearchStrategy:
    """``None`` or ``Timestamped`` with few distinct timestamps, so that ties are frequent."""
    return st.one_of(st.none(), st.builds(Timestamped, st.integers(-3, 3), items))
