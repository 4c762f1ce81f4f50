"""``Window``: validation, tumbling and sliding windows, the windows a time belongs to,
the windows a watermark closes, and the panes that tile them (after Gearpump's WindowSpec)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiles import examples

from state.errors import StateValueError
from state.window import Window

# -- validation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((0,), "size_ms"),
        ((-100,), "size_ms"),
        ((100, 0), "step_ms"),
        ((100, -10), "step_ms"),
        ((1.5,), "size_ms"),
        (("100",), "size_ms"),
        ((True,), "size_ms"),
        ((100, 50.0), "step_ms"),
        ((100, False), "step_ms"),
    ],
)
def test_a_bad_size_or_step_raises_a_state_value_error_naming_the_field(args, field):
    with pytest.raises(StateValueError, match=field):
        Window(*args)


def test_a_step_larger_than_the_size_raises_naming_both_fields():
    with pytest.raises(StateValueError, match="step_ms=200.*size_ms=100"):
        Window(100, 200)


def test_a_bad_window_is_also_a_value_error():
    with pytest.raises(ValueError):
        Window(0)


# -- tumbling and sliding ------------------------------------------------------------


def test_a_window_without_a_step_is_tumbling():
    window = Window(100)
    assert window.step_ms == 100
    assert window.tumbling


def test_a_window_with_a_step_equal_to_its_size_is_tumbling():
    assert Window(100, 100).tumbling


def test_a_window_with_a_smaller_step_is_sliding():
    window = Window(300, 100)
    assert not window.tumbling
    assert (window.size_ms, window.step_ms) == (300, 100)


def test_windows_are_values():
    assert Window(300, 100) == Window(300, 100)
    assert hash(Window(300, 100)) == hash(Window(300, 100))
    assert Window(300, 100) != Window(300, 150)
    with pytest.raises(AttributeError):
        Window(100).size_ms = 5  # type: ignore[misc]


# -- starts_containing ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("ts", "starts"),
    [(0, [0]), (1, [0]), (99, [0]), (100, [100]), (250, [200]), (1000, [1000])],
)
def test_a_time_lies_in_exactly_one_tumbling_window(ts, starts):
    assert list(Window(100).starts_containing(ts)) == starts


@pytest.mark.parametrize(
    ("ts", "starts"),
    [
        (0, [0]),
        (99, [0]),
        (100, [0, 100]),
        (299, [0, 100, 200]),
        (300, [100, 200, 300]),
        (350, [100, 200, 300]),
        (400, [200, 300, 400]),
    ],
)
def test_a_time_lies_in_size_over_step_sliding_windows_oldest_first(ts, starts):
    assert list(Window(300, 100).starts_containing(ts)) == starts


def test_sliding_windows_with_a_step_that_does_not_divide_the_size():
    # [0, 250), [100, 350), [200, 450), [300, 550) ...
    window = Window(250, 100)
    assert list(window.starts_containing(260)) == [100, 200]
    assert list(window.starts_containing(300)) == [100, 200, 300]
    assert list(window.starts_containing(349)) == [100, 200, 300]
    assert list(window.starts_containing(350)) == [200, 300]


def test_no_window_starts_before_the_epoch():
    assert list(Window(1000, 10).starts_containing(25)) == [0, 10, 20]


# -- starts_closing ------------------------------------------------------------------


def test_a_tumbling_window_closes_when_the_watermark_reaches_its_end():
    window = Window(100)
    assert list(window.starts_closing(0, 99)) == []
    assert list(window.starts_closing(0, 100)) == [0]
    assert list(window.starts_closing(99, 100)) == [0]
    assert list(window.starts_closing(100, 199)) == []
    assert list(window.starts_closing(100, 200)) == [100]


def test_a_watermark_jump_closes_every_window_ending_in_between_oldest_first():
    assert list(Window(100).starts_closing(0, 450)) == [0, 100, 200, 300]
    assert list(Window(300, 100).starts_closing(0, 650)) == [0, 100, 200, 300]
    assert list(Window(300, 100).starts_closing(350, 650)) == [100, 200, 300]


def test_consecutive_watermark_advances_close_each_window_once():
    window = Window(300, 100)
    marks = [0, 50, 299, 300, 301, 420, 420, 999, 1000, 1730]
    closed = [s for a, b in zip(marks, marks[1:]) for s in window.starts_closing(a, b)]
    assert closed == list(window.starts_closing(0, 1730))
    assert len(closed) == len(set(closed))


def test_a_watermark_that_does_not_advance_closes_nothing():
    assert list(Window(300, 100).starts_closing(500, 500)) == []
    assert list(Window(300, 100).starts_closing(500, 400)) == []


# -- oldest_open_start ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("watermark", "start"),
    [(0, 0), (99, 0), (100, 100), (101, 100), (250, 200)],
)
def test_the_oldest_open_tumbling_window_is_the_one_holding_the_watermark(watermark, start):
    assert Window(100).oldest_open_start(watermark) == start


@pytest.mark.parametrize(
    ("watermark", "start"),
    [(0, 0), (299, 0), (300, 100), (350, 100), (400, 200)],
)
def test_the_oldest_open_sliding_window_is_the_first_not_yet_ended(watermark, start):
    assert Window(300, 100).oldest_open_start(watermark) == start


# -- panes ---------------------------------------------------------------------------


def test_panes_of_a_tumbling_window_are_the_window():
    assert Window(100).pane_ms() == 100


def test_panes_of_a_sliding_window_are_the_gcd_of_size_and_step():
    assert Window(300, 100).pane_ms() == 100
    assert Window(250, 100).pane_ms() == 50


def test_a_checkpoint_interval_narrows_the_panes_so_boundaries_never_split_one():
    assert Window(300, 100).pane_ms(1000) == 100
    assert Window(300, 100).pane_ms(30) == 10
    assert Window(60_000).pane_ms(45_000) == 15_000
    assert Window(100).pane_ms(7) == 1


# -- properties ----------------------------------------------------------------------

windows = st.integers(1, 1000).flatmap(lambda size: st.tuples(st.just(size), st.integers(1, size)))
times = st.integers(0, 10**7)


@settings(max_examples=examples(300))
@given(windows, times)
def test_a_time_lies_in_every_window_of_starts_containing_and_in_no_other(size_step, ts):
    size, step = size_step
    window = Window(size, step)
    starts = set(window.starts_containing(ts))
    assert starts, "every time lies in some window"
    near = range(max(0, (ts - 3 * size) // step * step), ts + 3 * size + 1, step)
    for start in near:
        assert (start in starts) == (start <= ts < start + size), start
    assert starts <= set(near)
    assert all(s % step == 0 for s in starts)
    assert list(window.starts_containing(ts)) == sorted(starts)


@settings(max_examples=examples(300))
@given(windows, times, st.integers(0, 5000))
def test_starts_closing_are_exactly_the_windows_ending_in_the_watermark_range(size_step, after, advance):
    size, step = size_step
    window = Window(size, step)
    until = after + advance
    closing = set(window.starts_closing(after, until))
    near = range(max(0, (after - 2 * size) // step * step), until + step, step)
    for start in near:
        assert (start in closing) == (after < start + size <= until), start
    assert closing <= set(near)


@settings(max_examples=examples(300))
@given(windows, times)
def test_oldest_open_start_is_the_first_window_the_watermark_has_not_closed(size_step, watermark):
    size, step = size_step
    window = Window(size, step)
    oldest = window.oldest_open_start(watermark)
    assert oldest % step == 0
    assert oldest + size > watermark
    assert oldest == 0 or oldest - step + size <= watermark
    # ranges compare as sequences: the closed windows are exactly those before it
    assert window.starts_closing(0, watermark) == range(0, oldest, step)


@settings(max_examples=examples(200))
@given(windows, st.integers(1, 10**6))
def test_panes_tile_every_window_and_every_checkpoint_interval(size_step, interval):
    size, step = size_step
    pane = Window(size, step).pane_ms(interval)
    assert size % pane == 0 and step % pane == 0 and interval % pane == 0
    assert pane == math.gcd(size, step, interval)
