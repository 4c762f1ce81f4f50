"""Checkpoint boundaries: multiples of the interval, strictly after or at-or-before a time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from state.boundaries import boundary_after, boundary_at_or_before, check_interval_ms
from state.errors import StateValueError

INTERVAL = 100


@pytest.mark.parametrize(("ts", "after"), [(0, 100), (1, 100), (99, 100), (100, 200), (101, 200)])
def test_boundary_after_is_strictly_after(ts, after):
    assert boundary_after(ts, INTERVAL) == after


@pytest.mark.parametrize(("ts", "at"), [(0, 0), (99, 0), (100, 100), (199, 100)])
def test_boundary_at_or_before_may_be_the_time_itself(ts, at):
    assert boundary_at_or_before(ts, INTERVAL) == at


@given(st.integers(0, 10**13), st.integers(1, 10**7))
def test_a_time_lies_between_its_boundary_at_or_before_and_the_next_one(ts, interval):
    at, after = boundary_at_or_before(ts, interval), boundary_after(ts, interval)
    assert at % interval == 0 and after - at == interval
    assert at <= ts < after


def test_boundaries_of_numpy_integers_are_the_same():
    assert (boundary_after(np.int64(150), INTERVAL), boundary_at_or_before(np.uint32(200), INTERVAL)) == (200, 200)


@pytest.mark.parametrize("bad", [0, -100, 1.5, "100", None, True])
def test_an_interval_that_is_not_a_positive_int_is_refused_naming_it(bad):
    with pytest.raises(StateValueError, match="interval_ms"):
        check_interval_ms(bad)


def test_a_positive_interval_is_accepted_as_it_is():
    assert check_interval_ms(INTERVAL) == INTERVAL
