import math

import hypothesis.strategies as st
import numpy as np
import pytest

from monoids import Count, Max, Min, MonoidTypeError, MonoidValueError, Sum, check_monoid_laws

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
ALL_INT64 = st.integers(INT64_MIN, INT64_MAX)
ALL_FLOATS = st.floats(allow_nan=False)


def test_integer_sum_obeys_the_laws(small_ints):
    check_monoid_laws(Sum(int), small_ints, max_examples=50)


def test_float_sum_obeys_the_laws_up_to_rounding(floats):
    check_monoid_laws(Sum(float), floats, max_examples=50)


def test_count_obeys_the_laws():
    check_monoid_laws(Count(), st.integers(0, 2**40), max_examples=50)


@pytest.mark.parametrize("monoid", [Max(int), Min(int)], ids=repr)
def test_integer_extrema_obey_the_laws_on_all_64_bit_values(monoid):
    check_monoid_laws(monoid, ALL_INT64, max_examples=50)


@pytest.mark.parametrize("monoid", [Max(float), Min(float)], ids=repr)
def test_float_extrema_obey_the_laws_including_infinities(monoid):
    check_monoid_laws(monoid, ALL_FLOATS, max_examples=50)


def test_integer_sum_that_leaves_64_bits_raises_instead_of_wrapping():
    s = Sum(int)
    with pytest.raises(MonoidValueError, match="does not fit in 64 bits"):
        s.plus(INT64_MAX, 1)
    with pytest.raises(MonoidValueError, match="does not fit in 64 bits"):
        s.minus(INT64_MIN, 1)
    with pytest.raises(MonoidValueError, match="row 1"):
        s.plus_columns(np.array([0, INT64_MAX]), np.array([0, 1]))
    with pytest.raises(MonoidValueError, match="key 1"):
        s.reduce_by_key(np.array([0, 1, 1]), 2, np.array([5, INT64_MAX, 1]))
    with pytest.raises(MonoidValueError, match="does not fit in 64 bits"):
        s.fold(np.array([INT64_MIN, -1]))


def test_integer_column_sums_are_exact_when_only_an_intermediate_leaves_64_bits():
    s = Sum(int)
    column = np.array([INT64_MAX, 1, -1, INT64_MIN, INT64_MAX])
    assert s.fold(column) == INT64_MAX - 1
    assert s.reduce_by_key(np.array([0, 0, 0, 1, 1]), 2, column).tolist() == [INT64_MAX, -1]


def test_float_column_sums_add_in_row_order_like_the_scalar_fold():
    s = Sum(float)
    values = [1e16, 1.0, -1e16, 1.0]
    assert s.fold(s.column(values)) == s.sum(values)


def test_wrong_value_types_raise_a_type_error_naming_the_value_and_where():
    with pytest.raises(MonoidTypeError, match=r"got True at key 'k'"):
        Sum(int).validate(True, "key 'k'")
    with pytest.raises(MonoidTypeError, match=r"got 1\.5 at row 3"):
        Max(int).validate(1.5, "row 3")
    with pytest.raises(MonoidTypeError, match=r"got '1'"):
        Sum(float).column(["1"])
    with pytest.raises(MonoidTypeError, match="int or float"):
        Sum(str)


def test_nan_raises_a_value_error_naming_where():
    with pytest.raises(MonoidValueError, match="NaN at key 'k'"):
        Sum(float).validate(math.nan, "key 'k'")
    with pytest.raises(MonoidValueError, match=r"NaN \(row 1 at batch 7\)"):
        Max(float).column(np.array([1.0, math.nan]), "batch 7")


def test_out_of_range_numbers_raise_a_value_error():
    with pytest.raises(MonoidValueError, match="does not fit in 64 bits"):
        Sum(int).validate(2**63)
    with pytest.raises(MonoidValueError, match="too large for a float"):
        Sum(float).validate(10**400)


def test_extrema_present_their_identity_for_empty_keys():
    assert Max(float).reduce_by_key(np.array([0]), 2, np.array([2.5])).tolist() == [2.5, -math.inf]
    assert Min(int).present(Min(int).zero()) == INT64_MAX


def test_float_sum_equivalence_tolerates_rounding_but_not_real_differences():
    s = Sum(float)
    assert s.equivalent((0.1 + 0.2) + 0.3, 0.1 + (0.2 + 0.3))
    assert not s.equivalent(1.0, 1.001)
    assert s.equivalent(1.0, 1.001, rel_tol=0.01)
    assert not Sum(int).equivalent(1, 2)


def test_numbers_present_as_their_column_unless_present_is_overridden():
    column = np.array([3, -1, 2**62], dtype=np.int64)
    for monoid in (Sum(), Count(), Max(), Sum(float)):
        held = monoid.column(column.tolist() if monoid.dtype == np.int64 else [0.5, 1.5])
        shown = monoid.present_column(held)
        assert shown.dtype == monoid.result_dtype and shown.tolist() == [monoid.present(v) for v in held.tolist()]

    class ReadAsFloats(Sum):
        def __init__(self):
            super().__init__()
            self.result_dtype = np.dtype(np.float64)

    class Halved(ReadAsFloats):
        def present(self, value):
            return value / 2

    class InUnits(ReadAsFloats):  # cents held, units read
        def values(self, column):
            return (column / 100).tolist()

    assert Halved().present_column(column[:2]).tolist() == [1.5, -0.5]
    assert InUnits().present_column(np.array([150, 250])).tolist() == [1.5, 2.5]
