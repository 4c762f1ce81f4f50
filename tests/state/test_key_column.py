"""``KeyColumn``: a column that grows its head in place and never changes what another
column sharing it holds."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from profiles import examples

from state.key_column import KeyColumn


def keys(*names: str) -> np.ndarray:
    return np.array(list(names), dtype=object)


def test_a_head_grows_in_place_and_a_snapshot_of_it_stays_as_it_was():
    first = KeyColumn(keys("a", "b", "c", "d")).then(4, keys("e"), keys())  # copied into an array with room
    second = first.then(5, keys("f"), keys())
    third = second.then(6, keys(), keys("p"))
    assert first.whole().tolist() == ["a", "b", "c", "d", "e"]
    assert second.whole().tolist() == ["a", "b", "c", "d", "e", "f"]
    assert third.whole().tolist() == ["a", "b", "c", "d", "e", "f", "p"]
    assert np.shares_memory(first.whole(), second.whole())  # in place: one array


def test_two_columns_grown_from_one_head_each_keep_their_own_keys():
    base = KeyColumn(keys("a", "b", "c", "d")).then(4, keys("e"), keys())  # room for two more
    kept = base.then(5, keys(), keys("t"))  # the head of base, which a failed batch grows first
    failed = base.then(5, keys("x", "y"), keys())
    retried = kept.then(5, keys("z"), keys())
    assert failed.whole().tolist() == [*"abcde", "x", "y"]
    assert retried.whole().tolist() == [*"abcde", "z"]
    assert kept.whole().tolist() == [*"abcde", "t"] and base.whole().tolist() == [*"abcde"]
    assert not np.shares_memory(failed.whole(), retried.whole())


def test_settled_rows_past_the_head_move_into_it_and_a_shorter_head_copies_before_growing():
    column = KeyColumn(keys("a")).then(1, keys(), keys("b", "c"))
    grown = column.then(2, keys("d"), keys("e"))  # "b" joins the head
    assert grown.whole().tolist() == ["a", "b", "d", "e"]
    shorter = grown.then(1, keys("f"), keys())  # the head's array holds "b", "d" after "a"
    assert shorter.whole().tolist() == ["a", "f"] and grown.whole().tolist() == ["a", "b", "d", "e"]


@st.composite
def columns(draw):
    """A column built by a few steps of ``then``, with the list it should hold."""
    column, expected = KeyColumn(keys(*draw(st.lists(st.sampled_from("abc"), max_size=4)))), None
    expected = column.whole().tolist()
    for _ in range(draw(st.integers(0, 4))):
        settled = draw(st.integers(0, len(expected)))
        head, tail = (draw(st.lists(st.sampled_from("xyz"), max_size=3)) for _ in range(2))
        column = column.then(settled, keys(*head), keys(*tail))
        expected = expected[:settled] + head + tail
    return column, expected


@settings(max_examples=examples(200))
@given(columns(), st.data())
def test_the_keys_of_any_rows_are_those_of_the_whole_column(built, data):
    column, expected = built
    assert column.whole().tolist() == expected and len(column) == len(expected)
    n = len(expected)
    start, stop = data.draw(st.integers(0, n)), data.draw(st.integers(0, n))
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    rows = np.array(data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=6 if n else 0)), dtype=np.intp)
    for picked in (slice(start, stop), slice(start, None), mask, rows):
        assert column.take(picked).tolist() == np.array(expected, dtype=object)[picked].tolist()
