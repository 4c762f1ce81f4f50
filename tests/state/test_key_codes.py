"""Key codes: ``factorize_keys`` numbers keys as pandas does with nulls as keys, and
``first_rows`` finds where it first met each."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from state.key_codes import factorize_keys, first_rows


@given(st.lists(st.one_of(st.sampled_from(["a", "b", "c"]), st.none(), st.just(float("nan")), st.integers(0, 3)),
                max_size=30))
def test_keys_factorize_as_pandas_does_with_nulls_as_keys(keys):
    array = np.array(keys, dtype=object)
    codes, unique_keys = factorize_keys(array)
    expected_codes, expected_keys = pd.factorize(array, use_na_sentinel=False)
    np.testing.assert_array_equal(codes, expected_codes)
    assert list(map(repr, unique_keys)) == list(map(repr, expected_keys))


def test_integer_keys_factorize_as_pandas_does():
    keys = np.array([5, 3, 5, 9, 3], dtype=np.int64)
    codes, unique_keys = factorize_keys(keys)
    assert codes.tolist() == [0, 1, 0, 2, 1] and unique_keys.tolist() == [5, 3, 9]


@given(st.lists(st.integers(0, 20), max_size=60))
def test_the_first_row_of_each_key_is_where_factorize_first_met_it(values):
    codes, _ = pd.factorize(np.array(values, dtype=np.int64))
    _, expected = np.unique(codes, return_index=True)
    np.testing.assert_array_equal(first_rows(codes), expected)
