import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from monoids import Averaged, First, Moments, Sum, Timestamped
from monoids.columns import join_columns

# Records (Averaged, Moments), numbers (Sum) and objects (First).
MONOIDS = [Averaged(), Moments(), Sum(int), First()]


def _column(monoid, n: int, seed: int) -> np.ndarray:
    values = range(seed, seed + n)
    if isinstance(monoid, First):
        return monoid.column([Timestamped(v, f"v{v}") for v in values])
    if isinstance(monoid, Sum):
        return monoid.column(values)
    return monoid.prepare_column(np.array(values, dtype=float))


@given(st.sampled_from(MONOIDS), st.lists(st.tuples(st.integers(0, 9), st.integers(1, 3)), max_size=4))
def test_joined_columns_are_those_numpy_concatenates(monoid, parts):
    # Each part a strided view of a column of its own: the bytes of records are read
    # through the view, not from the column's buffer as a whole.
    columns = [_column(monoid, 3 * n, seed)[::step] for seed, (n, step) in enumerate(parts)] or [_column(monoid, 0, 0)]
    joined = join_columns(columns)
    assert joined.dtype == monoid.dtype
    assert monoid.values(joined) == monoid.values(np.concatenate(columns))


def test_records_of_another_layout_are_converted_as_numpy_converts_them():
    averaged = Averaged().prepare_column(np.array([1.0, 2.0]))
    swapped = averaged.astype(averaged.dtype.newbyteorder())
    joined = join_columns([averaged, swapped])
    assert joined.dtype == averaged.dtype
    assert Averaged().values(joined) == Averaged().values(np.concatenate([averaged, averaged]))
