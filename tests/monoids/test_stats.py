import math

import hypothesis.strategies as st
import numpy as np
import pytest

from monoids import (
    Averaged,
    AveragedValue,
    Moments,
    MomentsValue,
    MonoidTypeError,
    MonoidValueError,
    check_monoid_laws,
)


def test_averaged_obeys_the_group_laws(floats):
    values = st.builds(AveragedValue, st.integers(-1000, 1000), floats)
    check_monoid_laws(Averaged(), values, max_examples=50)


def test_moments_obey_the_laws(floats):
    m = Moments()
    samples = st.lists(floats, max_size=6).map(lambda xs: m.fold(m.prepare_column(xs)))
    check_monoid_laws(m, samples, max_examples=50)


def test_averaged_presents_the_mean_and_nan_for_no_observations():
    a = Averaged()
    column = a.prepare_column([1.0, 2.0, 6.0, 10.0])
    by_key = a.reduce_by_key(np.array([0, 0, 0, 1]), 3, column)
    assert a.present_column(by_key).tolist()[:2] == [3.0, 10.0]
    assert math.isnan(a.present(a.zero()))
    assert a.fold(column).mean == 4.75


def test_averaged_minus_takes_observations_out():
    a = Averaged()
    total = a.sum([a.prepare(1.0), a.prepare(5.0), a.prepare(9.0)])
    assert a.minus(total, a.prepare(9.0)) == AveragedValue(2, 6.0)
    assert a.negate(a.prepare(2.0)) == AveragedValue(-1, -2.0)


def test_moments_match_numpy_whatever_the_grouping():
    m = Moments()
    xs = np.random.default_rng(7).normal(100.0, 15.0, size=1001)
    codes = np.arange(len(xs)) % 7
    merged = m.fold(m.reduce_by_key(codes, 7, m.prepare_column(xs)))
    sequential = m.sum(m.prepare(float(x)) for x in xs)
    for value in (merged, sequential):
        assert value.count == len(xs)
        assert math.isclose(value.mean, xs.mean(), rel_tol=1e-12)
        assert math.isclose(value.variance, xs.var(), rel_tol=1e-9)
        assert math.isclose(value.stddev, xs.std(), rel_tol=1e-9)
    assert math.isclose(m.present(merged), xs.var(), rel_tol=1e-9)


def test_moments_stay_accurate_for_a_large_mean_and_small_spread():
    m = Moments()
    xs = 1e9 + np.arange(1000) % 10
    value = m.fold(m.prepare_column(xs))
    assert math.isclose(value.variance, np.var(np.arange(1000) % 10), rel_tol=1e-6)


def test_non_finite_observations_raise_a_value_error_naming_the_row():
    with pytest.raises(MonoidValueError, match=r"cannot observe nan \(row 2\)"):
        Averaged().prepare_column([1.0, 2.0, math.nan])
    with pytest.raises(MonoidValueError, match="cannot observe inf"):
        Moments().prepare(math.inf)
    with pytest.raises(MonoidTypeError, match="observes numbers, got 'x'"):
        Moments().prepare("x")


def test_invalid_values_raise_errors_naming_the_value_and_where():
    with pytest.raises(MonoidTypeError, match=r"takes AveragedValue values, got \(1, 2\.0\) at key 'k'"):
        Averaged().validate((1, 2.0), "key 'k'")
    with pytest.raises(MonoidTypeError, match=r"count of AveragedValue\(count=1\.5.* at row 4 must be an int"):
        Averaged().validate(AveragedValue(1.5, 2.0), "row 4")
    with pytest.raises(MonoidValueError, match=r"total=nan\) at key 'k': total must be finite"):
        Averaged().validate(AveragedValue(1, math.nan), "key 'k'")
    with pytest.raises(MonoidValueError, match=r"count=-1.* at row 1, batch 2: count must be >= 0"):
        Moments().column([Moments().zero(), MomentsValue(-1, 0.0, 0.0)], "batch 2")
    with pytest.raises(MonoidValueError, match="empty value must have mean 0"):
        Moments().validate(MomentsValue(0, 1.0, 0.0))
    with pytest.raises(MonoidValueError, match="does not fit in 64 bits"):
        Moments().validate(MomentsValue(2**63, 1.0, 0.0))


@pytest.mark.parametrize("monoid, value", [
    (Averaged(), AveragedValue(1, 2.0)),
    (Averaged(), AveragedValue(1, 2)),  # an int total: rebuilt with a float
    (Averaged(), AveragedValue(np.int64(3), np.float32(0.5))),
    (Averaged(), AveragedValue(True, 2.0)),
    (Averaged(), AveragedValue(2**63, 2.0)),
    (Averaged(), AveragedValue(-2**63 - 1, 2.0)),
    (Averaged(), AveragedValue(1, math.inf)),
    (Averaged(), AveragedValue(1, "2.0")),
    (Averaged(), MomentsValue(1, 2.0, 0.0)),
    (Moments(), MomentsValue(2, 1.0, 0.5)),
    (Moments(), MomentsValue(2, 1.0, -0.5)),  # an invariant beyond finite floats
    (Moments(), MomentsValue(0, 1.0, 0.0)),
])
def test_values_already_of_the_dtype_s_types_skip_the_full_check_and_decide_the_same(monoid, value):
    def full(check):
        try:
            return check()
        except (MonoidTypeError, MonoidValueError) as exc:
            return type(exc)

    by_full_check = full(lambda: monoid.values(monoid._checked([monoid._typed_row(value, "")], ""))[0])
    validated = full(lambda: monoid.validate(value))
    assert validated == by_full_check
    assert type(validated) is type(by_full_check)
    if not isinstance(validated, type):
        assert [type(x) for x in monoid._row(validated)] == [int if f == "count" else float
                                                          for f in monoid.dtype.names]
    column = full(lambda: monoid.column([monoid.zero(), value]))
    assert column == by_full_check if isinstance(column, type) else monoid.values(column)[1] == by_full_check


def test_structured_columns_are_validated_without_a_python_loop():
    m = Moments()
    column = m.prepare_column([1.0, 2.0])
    column["m2"][1] = -1.0
    with pytest.raises(MonoidValueError, match="row 1.*m2 must be >= 0"):
        m.column(column)


def test_counts_that_leave_64_bits_raise():
    a = Averaged()
    big = AveragedValue(2**63 - 1, 1.0)
    with pytest.raises(MonoidValueError, match="does not fit in 64 bits"):
        a.plus(big, a.prepare(1.0))
    with pytest.raises(MonoidValueError, match="does not fit in 64 bits"):
        a.fold(a.column([big, big]))
