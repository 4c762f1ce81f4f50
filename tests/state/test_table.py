"""``KeyedTable``: vectorized updates against scalar folds, totals, late rows, windows,
checkpoints, recovery with replay, encoding and every kind of damage to it."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiles import examples

import monoids
from monoids.base import Monoid, MonoidError, MonoidTypeError, MonoidValueError
from monoids.numeric import Count, Max, Min, Sum
from state import codec
from state.errors import CorruptCheckpointError, StateValueError
from state.sessions import SessionTable
from state.key_codes import factorize_keys
from state.table import COMMITTED, KeyedTable
from state.table_format import describe
from state.tables import decode_table, read_table
from state.window import SessionWindow, Window

INTERVAL = 100


def table_of(monoid=None, interval=INTERVAL, window=None) -> KeyedTable:
    return KeyedTable(monoid or Sum(), interval, window)


def apply(table: KeyedTable, messages, batches=None):
    """Applies ``(key, ts, value)`` messages in order, in batches of the given sizes."""
    sizes = batches or [len(messages)]
    start = 0
    for size in sizes:
        chunk = messages[start : start + size]
        start += size
        if chunk:
            keys, stamps, values = zip(*chunk)
            table.update(np.array(keys, dtype=object), np.array(stamps, dtype=np.int64), list(values))
    if start < len(messages):
        apply(table, messages[start:])


def totals(table: KeyedTable, keys=None) -> dict:
    found, values = table.totals(keys)
    return dict(zip(found.tolist(), table.monoid.values(values)))


def rows(table: KeyedTable) -> list:
    return sorted(
        zip(table.keys.tolist(), table.buckets.tolist(), table.monoid.values(table.values)),
        key=lambda r: (str(type(r[0])), r[0], r[1]),
    )


def scalar_folds(monoid: Monoid, messages) -> dict:
    out: dict = {}
    for key, _, value in messages:
        out[key] = monoid.plus(out.get(key, monoid.zero()), monoid.validate(value))
    return out


def assert_equivalent(monoid: Monoid, got: dict, expected: dict):
    assert got.keys() == expected.keys()
    for key in expected:
        assert monoid.equivalent(got[key], expected[key]), (key, got[key], expected[key])


def state_of(table: KeyedTable) -> tuple:
    return (rows(table), table.checkpoint_ms, table.emitted_ms, table.late_count)


# -- construction --------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -100, 1.5, "100", None, True])
def test_a_bad_interval_raises(bad):
    with pytest.raises(StateValueError, match="interval_ms"):
        KeyedTable(Sum(), bad)


def test_buckets_are_the_interval_without_a_window_and_panes_with_one():
    assert table_of().bucket_ms == 100
    assert table_of(interval=1000, window=Window(300, 100)).bucket_ms == 100
    assert table_of(interval=150, window=Window(300, 100)).bucket_ms == 50


def test_a_new_table_is_empty():
    table = table_of()
    assert len(table) == 0
    assert totals(table) == {}
    assert table.get("absent") == 0
    assert (table.checkpoint_ms, table.emitted_ms, table.late_count, table.sealed_ms) == (0, 0, 0, 0)


# -- updates -------------------------------------------------------------------------


def test_one_row_per_key_and_bucket():
    table = table_of()
    apply(table, [("a", 10, 1), ("a", 20, 2), ("b", 30, 4), ("a", 150, 8), ("a", 99, 16)])
    assert rows(table) == [("a", 0, 19), ("a", 100, 8), ("b", 0, 4)]


def test_update_returns_the_keys_touched_in_order_of_appearance_unless_told_not_to():
    table = table_of()
    touched = table.update(np.array(["b", "a", "b"], dtype=object), np.array([1, 2, 3]), [1, 1, 1])
    assert list(touched) == ["b", "a"]
    table.take_touched_totals()
    assert table.update(np.array(["c", "a"], dtype=object), np.array([4, 5]), [1, 1], touched=False) is None
    keys, values = table.take_touched_totals()  # marked all the same
    assert keys.tolist() == ["a", "c"] and values.tolist() == [2, 1]


def test_a_decoded_table_has_touched_no_key():
    table = table_of()
    apply(table, [("x", 10, 1), ("y", 30, 4)])
    decoded = decode_table(table.encode(), Sum(), INTERVAL)
    assert decoded.take_touched_totals()[0].tolist() == []
    apply(decoded, [("y", 50, 8)])
    assert decoded.take_touched_totals()[0].tolist() == ["y"]


def test_touched_totals_gather_the_keys_of_every_update_since_the_last_take():
    table = table_of()
    apply(table, [("a", 10, 1), ("b", 20, 2)])
    apply(table, [("a", 30, 4)])  # folded into a's row of the first update
    apply(table, [("c", 150, 8), ("b", 160, 16)])  # new rows of b and c
    assert table.take_touched_totals()[0].tolist() == ["a", "b", "c"]
    assert table.take_touched_totals()[0].tolist() == []

    apply(table, [("c", 170, 32)])
    table.checkpoint(100)  # folds a's and b's rows before it; c stays touched
    apply(table, [("b", 180, 64)])
    keys, values = table.take_touched_totals()
    assert dict(zip(keys.tolist(), table.monoid.values(values))) == {"b": 82, "c": 40}


def test_update_takes_plain_lists_and_numpy_keys():
    table, numbered = table_of(), table_of()
    table.update(["x", "y"], [1, 2], [3, 4])
    table.update(np.array(["x", "z"]), np.array([5, 6], dtype=np.int32), np.array([1, 2]))
    numbered.update(np.array([7, 7]), np.array([5, 6], dtype=np.int32), np.array([1, 2]))
    numbered.update([8, 7], [7, 8], [4, 8])
    assert totals(table) == {"x": 4, "y": 4, "z": 2} and totals(numbered) == {7: 11, 8: 4}


def test_update_takes_a_frames_columns_and_returns_the_keys_touched_once_each_in_order():
    table = table_of(Sum(float))
    frame = pd.DataFrame(
        {"key": ["a", "b", "a", "c"], "timestamp": [10, 20, 130, 240], "value": [0.5, 1.0, 2.0, 4.0]}
    )
    touched = table.update(frame["key"].to_numpy(), frame["timestamp"].to_numpy(), frame["value"].to_numpy())
    assert list(touched) == ["a", "b", "c"]
    assert totals(table) == {"a": 2.5, "b": 1.0, "c": 4.0}
    assert rows(table) == [("a", 0, 0.5), ("a", 100, 2.0), ("b", 0, 1.0), ("c", 200, 4.0)]


def test_update_with_integer_keys():
    table = table_of(Count())
    table.update(np.array([3, 1, 3], dtype=np.int64), np.array([1, 2, 3]), np.array([1, 1, 1]))
    assert totals(table) == {3: 2, 1: 1}


def test_totals_for_a_subset_of_keys_ignore_unknown_keys():
    table = table_of()
    apply(table, [("a", 10, 1), ("b", 20, 2), ("c", 130, 4), ("a", 250, 8)])
    assert totals(table, ["a", "c", "zzz"]) == {"a": 9, "c": 4}
    assert totals(table, []) == {}
    assert table.get("a") == 9
    assert table.get("zzz") == 0


def test_get_of_an_unknown_key_is_zero_for_every_monoid():
    assert table_of(Max()).get("k") == Max().zero()
    assert table_of(Min(float)).get("k") == math.inf


def test_get_of_a_key_is_its_own_fold_beside_the_null_key():
    table = table_of()
    apply(table, [(None, 10, 1), ("a", 20, 2)])
    assert (table.get("a"), table.get(None)) == (2, 1)


key_strategies = {
    "str": st.text(alphabet="abcdefgh", min_size=1, max_size=3),
    "int": st.integers(-(2**40), 2**40),
}
value_strategies = {
    "sum": (Sum(), st.integers(-(10**12), 10**12)),
    "float": (Sum(float), st.floats(-1e6, 1e6, allow_nan=False)),
    "count": (Count(), st.just(1)),
    "max": (Max(), st.integers(-(10**12), 10**12)),
    "min": (Min(float), st.floats(-1e6, 1e6, allow_nan=False)),
}


@settings(max_examples=examples(60), suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(key_strategies)),
    st.sampled_from(sorted(value_strategies)),
    st.data(),
)
def test_vectorized_updates_equal_per_key_scalar_folds(key_kind, monoid_name, data):
    monoid, values = value_strategies[monoid_name]
    keys = key_strategies[key_kind]
    messages = data.draw(st.lists(st.tuples(keys, st.integers(0, 2000), values), max_size=200))
    batches = data.draw(st.lists(st.integers(1, 60), max_size=10))
    table = table_of(monoid)
    apply(table, messages, batches)
    assert_equivalent(monoid, totals(table), scalar_folds(monoid, messages))
    for key in {k for k, _, _ in messages[:5]}:
        assert monoid.equivalent(table.get(key), scalar_folds(monoid, messages)[key])
    # one row per (key, bucket) seen
    assert len(table) == len({(k, ts // INTERVAL) for k, ts, _ in messages})


def test_many_keys_in_one_batch_equal_scalar_folds():
    rng = np.random.default_rng(3)
    n = 20_000
    keys = rng.integers(0, 3000, size=n)
    stamps = rng.integers(0, 10_000, size=n)
    values = rng.integers(-1000, 1000, size=n)
    table = table_of()
    table.update(keys, stamps, values)
    expected = pd.Series(values).groupby(keys).sum().to_dict()
    assert totals(table) == expected


# -- late rows -----------------------------------------------------------------------


def test_rows_before_the_last_checkpoint_are_late_counted_and_skipped():
    table = table_of()
    apply(table, [("a", 10, 1)])
    table.checkpoint(100)
    touched = table.update(np.array(["a", "b", "c"], dtype=object), np.array([99, 100, 0]), [10, 20, 30])
    assert list(touched) == ["b"]
    assert table.late_count == 2
    assert totals(table) == {"a": 1, "b": 20}


def test_a_batch_of_only_late_rows_changes_nothing_but_the_count():
    table = table_of()
    apply(table, [("a", 10, 1)])
    table.checkpoint(200)
    before = rows(table)
    assert list(table.update(["a", "a"], [5, 150], [1, 1])) == []
    assert rows(table) == before
    assert table.late_count == 2


def test_rows_of_closed_windows_are_late():
    table = table_of(window=Window(300, 100))
    apply(table, [("a", 10, 1)])
    table.close_windows(350)
    apply(table, [("a", 349, 1), ("a", 350, 2)])
    assert table.late_count == 1
    assert table.sealed_ms == 350


# -- bad input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("monoid", "keys", "stamps", "values", "error"),
    [
        (Sum(), ["a", "b"], [10, -1], [1, 2], StateValueError),
        (Sum(), ["a", "b"], np.array([10.0, 20.0]), [1, 2], StateValueError),
        (Sum(), ["a", "b"], [10, 20], [1, "2"], MonoidTypeError),
        (Sum(), ["a", "b"], [10, 20], [1, 2.5], MonoidTypeError),
        (Sum(), ["a", "b"], [10, 20], [1, True], MonoidTypeError),
        (Sum(), ["a", "b"], [10, 20], [1, 2**70], MonoidValueError),
        (Sum(float), ["a", "b"], [10, 20], np.array([1.0, np.nan]), MonoidValueError),
        (Sum(float), ["a", "b"], [10, 20], [1.0, math.nan], MonoidValueError),
        (Sum(), ["a", "b", "c"], [10, 20], [1, 2], StateValueError),
        (Sum(), ["a", "b"], [10, 20], [1, 2, 3], StateValueError),
        (Sum(), ["a", "a"], [110, 120], [2**62, 2**62], MonoidValueError),  # the sum leaves 64 bits
    ],
)
def test_a_bad_batch_raises_and_applies_nothing(monoid, keys, stamps, values, error):
    table = table_of(monoid)
    apply(table, [("a", 5, monoid.validate(1)), ("b", 150, monoid.validate(2))])
    table.checkpoint(100)
    before = state_of(table)
    with pytest.raises(error):
        table.update(keys, stamps, values)
    assert state_of(table) == before


def test_a_bad_value_is_reported_with_where_it_came_from():
    with pytest.raises(MonoidError, match="got 'x' at the table update$"):
        table_of().update(["a"], [1], ["x"])
    with pytest.raises(StateValueError, match="^timestamps must be integers of milliseconds, got dtype float64$"):
        table_of().update(["a"], [1.0], [1])
    with pytest.raises(StateValueError, match="^keys, timestamps and values differ in length: 2, 1, 2$"):
        table_of().update(["a", "b"], [1], [1, 2])
    with pytest.raises(StateValueError, match=r"timestamp -5 at row 1 \(key .*'b'"):
        table_of().update(["a", "b"], [1, -5], [1, 1])


def test_a_batch_that_overflows_changes_nothing_not_even_the_late_count():
    """The overflow is found while merging, after the late rows were filtered out; the
    late rows must not be counted for a batch that was refused (a retry would count
    them twice, and the count is part of the checkpoint)."""
    table = table_of()
    apply(table, [("a", 150, 2**63 - 10)])
    table.checkpoint(100)
    before = state_of(table)
    with pytest.raises(MonoidValueError):
        table.update(["a", "a"], [50, 160], [1, 100])  # 50 is late; 160 overflows "a"
    assert state_of(table) == before


# -- windows -------------------------------------------------------------------------


def test_a_table_without_a_window_has_no_windows_to_close():
    with pytest.raises(StateValueError, match="^this table has no window: there are no windows to close$"):
        table_of().close_windows(100)
    with pytest.raises(StateValueError, match="no window"):
        table_of().open_windows()


def test_closed_windows_per_key_equal_brute_force():
    window = Window(300, 100)
    table = table_of(window=window)
    rng = np.random.default_rng(11)
    columns = rng.integers(0, 5, 400), rng.integers(0, 2000, 400), rng.integers(0, 100, 400)
    messages = [(str(k), int(t), int(v)) for k, t, v in zip(*columns)]
    apply(table, messages, [50] * 8)
    closed = table.close_windows(1500)
    got = dict(zip(zip(closed.keys.tolist(), closed.starts_ms.tolist()), closed.values.tolist()))
    expected = defaultdict(int)
    for k, ts, v in messages:
        for start in window.starts_containing(ts):
            if start + window.size_ms <= 1500:
                expected[(k, start)] += v
    assert got == dict(expected)
    assert (closed.ends_ms == closed.starts_ms + 300).all()
    assert len(table.close_windows(1500)) == 0
    open_ = table.open_windows()
    assert set(open_.starts_ms.tolist()) == {s for s in range(1300, 2000, 100)}


def test_windows_of_times_now_close_at_once_in_a_table_that_starts_at_zero():
    """Event times of today (some 1.8e12 ms) in a table that has emitted nothing: only
    the windows that hold rows are looked at, not every window since 1970."""
    now = 1_796_374_665_015
    table = table_of(window=Window(1_000, 500))
    apply(table, [("a", now, 1), ("b", now + 700, 2)])
    closed = table.close_windows(now + 2_000)
    assert sorted(zip(closed.keys.tolist(), closed.starts_ms.tolist(), closed.values.tolist())) == [
        ("a", now // 500 * 500 - 500, 1), ("a", now // 500 * 500, 1),
        ("b", (now + 700) // 500 * 500 - 500, 2), ("b", (now + 700) // 500 * 500, 2)]
    assert len(table.open_windows()) == 0


def test_checkpoints_of_a_windowed_table_prune_panes_of_closed_windows():
    window = Window(300, 100)
    table = table_of(window=window)
    apply(table, [("a", t, 1) for t in range(0, 1000, 50)])
    table.close_windows(700)
    data = table.checkpoint(700)
    # windows [400, 700) and older are closed: only panes of [500, 800) on are needed
    assert sorted(set(table.buckets.tolist())) == [500, 600, 700, 800, 900]
    restored = table_of(window=window)
    restored.recover(700, data)
    assert rows(restored) == [("a", 500, 2), ("a", 600, 2)]
    apply(restored, [("a", t, 1) for t in range(700, 1000, 50)])
    assert rows(restored) == rows(table)


# -- checkpoints ---------------------------------------------------------------------


def test_due_checkpoint_is_the_newest_boundary_newer_than_the_last_checkpoint():
    table = table_of()
    assert table.due_checkpoint(0) is None
    assert table.due_checkpoint(99) is None
    assert table.due_checkpoint(100) == 100
    assert table.due_checkpoint(475) == 400  # also for a table without any message
    table.checkpoint(400)
    assert table.due_checkpoint(475) is None
    assert table.due_checkpoint(499) is None
    assert table.due_checkpoint(500) == 500
    with pytest.raises(StateValueError, match="watermark_ms"):
        table.due_checkpoint(-1)


@pytest.mark.parametrize("bad", [150, 99, 1, -100, 1.0])
def test_a_checkpoint_at_a_non_multiple_of_the_interval_raises(bad):
    table = table_of()
    apply(table, [("a", 10, 1)])
    before = state_of(table)
    with pytest.raises(StateValueError):
        table.checkpoint(bad)
    assert state_of(table) == before


@pytest.mark.parametrize("bad", [0, 100, 200])
def test_a_checkpoint_at_or_before_the_last_one_raises(bad):
    table = table_of()
    table.checkpoint(200)
    with pytest.raises(StateValueError, match="after the last checkpoint 200"):
        table.checkpoint(bad)


def test_checkpoint_holds_only_rows_before_the_checkpoint_time():
    table = table_of()
    apply(table, [("a", 10, 1), ("a", 120, 2), ("b", 250, 4), ("c", 199, 8)])
    restored = decode_table(table.checkpoint(200), Sum(), INTERVAL)
    assert totals(restored) == {"a": 3, "c": 8}
    assert restored.checkpoint_ms == 200


def test_checkpoint_folds_the_rows_before_it_into_one_committed_row_per_key():
    table = table_of()
    apply(table, [("a", 10, 1), ("a", 120, 2), ("b", 250, 4), ("a", 310, 8)])
    table.checkpoint(300)
    assert rows(table) == [("a", COMMITTED, 3), ("a", 300, 8), ("b", COMMITTED, 4)]
    apply(table, [("a", 300, 16)])
    table.checkpoint(400)
    assert rows(table) == [("a", COMMITTED, 27), ("b", COMMITTED, 4)]
    assert totals(table) == {"a": 27, "b": 4}


def test_a_checkpoint_leaves_the_committed_rows_first_in_place_then_new_keys_then_the_rows_since():
    table = table_of()
    apply(table, [("a", 10, 1), ("b", 20, 2)])
    table.checkpoint(100)
    apply(table, [("c", 250, 4), ("a", 150, 8), ("d", 120, 16), ("e", 260, 32), ("d", 270, 64)])
    table.checkpoint(200)
    in_order = list(zip(table.keys.tolist(), table.buckets.tolist(), table.values.tolist()))
    assert in_order == [("a", COMMITTED, 9), ("b", COMMITTED, 2), ("d", COMMITTED, 16),
                        ("c", 200, 4), ("e", 200, 32), ("d", 200, 64)]
    # The order the checkpoint and the rows since it decode in, so a worker may go on from
    # the table once its results are taken (decoded, no key is touched).
    assert not table.decodes_as_held(following=True)
    table.take_touched_totals()
    assert table.decodes_as_held(following=True)
    assert list(table.totals()[0]) == ["a", "b", "d", "c", "e"] and totals(table)["d"] == 80


@pytest.mark.parametrize("window", [None, Window(300, 100)])
def test_seal_changes_the_table_as_a_checkpoint_does(window):
    messages = [("a", 10, 1), ("a", 120, 2), ("b", 250, 4), ("a", 310, 8), ("b", 520, 16)]
    checkpointed, sealed = table_of(window=window), table_of(window=window)
    for table in (checkpointed, sealed):
        apply(table, messages)
        if window:
            table.close_windows(400)
    checkpointed.checkpoint(400)
    assert sealed.seal(400) is None
    assert state_of(sealed) == state_of(checkpointed)
    for table in (checkpointed, sealed):
        apply(table, [("a", 399, 32), ("a", 400, 64)])
    assert state_of(sealed) == state_of(checkpointed)
    assert sealed.late_count == 1
    with pytest.raises(StateValueError, match="after the last checkpoint 400"):
        sealed.seal(400)


def test_recover_replaces_the_state_and_seals_the_checkpoint_time():
    table = table_of()
    apply(table, [("a", 10, 1), ("b", 150, 2)])
    data = table.checkpoint(200)
    other = table_of()
    apply(other, [("zzz", 999, 1000)])
    other.recover(200, data)
    assert totals(other) == {"a": 1, "b": 2}
    assert (other.checkpoint_ms, other.sealed_ms) == (200, 200)
    assert (other.whole_ms, other.chain_rows) == (200, 0)  # the next checkpoint may hold its changes alone
    apply(other, [("a", 199, 1), ("a", 200, 1)])
    assert other.late_count == 1
    assert totals(other) == {"a": 2, "b": 2}


def test_recover_at_another_time_than_the_checkpoints_raises():
    table = table_of()
    data = table.checkpoint(200)
    with pytest.raises(CorruptCheckpointError, match="holds the state at 200"):
        table_of().recover(300, data)


messages_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 1000), st.integers(-100, 100)),
    max_size=80,
)


@settings(max_examples=examples(100))
@given(messages_strategy, st.integers(1, 10), st.data())
def test_checkpoint_recover_and_replay_equals_the_uninterrupted_table(messages, boundary, data):
    t = boundary * INTERVAL
    cut = data.draw(st.integers(0, len(messages)), label="checkpoint after message")
    batches = data.draw(st.lists(st.integers(1, 20), max_size=6), label="batches")

    original = table_of()
    apply(original, messages[:cut], batches)
    checkpoint = original.checkpoint(t)
    apply(original, messages[cut:], batches)

    recovered = table_of()
    recovered.recover(t, checkpoint)
    apply(recovered, [m for m in messages if m[1] >= t], batches[::-1])

    assert totals(recovered) == totals(original)
    # and both equal the fold of the messages that were not late
    assert original.late_count == sum(1 for m in messages[cut:] if m[1] < t)
    on_time = [m for i, m in enumerate(messages) if i < cut or m[1] >= t]
    assert totals(original) == scalar_folds(Sum(), on_time)


@settings(max_examples=examples(60))
@given(messages_strategy, st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_a_chain_of_checkpoints_recovers_from_any_of_them(messages, steps, data):
    """Checkpoints at growing boundaries while messages arrive; recovering any one and
    replaying from its time on (the messages with ``ts >= T`` and the later checkpoints,
    where the watermark puts them) reaches the same totals and the same later checkpoints."""
    times = (np.cumsum(steps) * INTERVAL).tolist()
    n = len(times)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(messages)), min_size=n, max_size=n)))
    events, position = [], 0
    for t, cut in zip(times, cuts):
        events += [("msg", m) for m in messages[position:cut]] + [("checkpoint", t)]
        position = cut
    events += [("msg", m) for m in messages[position:]]

    def run(table, events_):
        taken = {}
        for kind, what in events_:
            if kind == "msg":
                apply(table, [what])
            else:
                taken[what] = table.checkpoint(what)
        return taken

    original = table_of()
    taken = run(original, events)
    for t, checkpoint in taken.items():
        recovered = table_of()
        recovered.recover(t, checkpoint)
        replay = [
            e for e in events if (e[0] == "msg" and e[1][1] >= t) or (e[0] == "checkpoint" and e[1] > t)
        ]
        replayed = run(recovered, replay)
        assert totals(recovered) == totals(original), t
        assert replayed.keys() == {u for u in taken if u > t}
        for u, later in replayed.items():
            again, first = (decode_table(b, Sum(), INTERVAL) for b in (later, taken[u]))
            assert totals(again) == totals(first), u


@settings(max_examples=examples(100))
@given(messages_strategy, st.lists(st.integers(1, 4), min_size=2, max_size=5), st.data())
def test_checkpoints_as_changes_rolled_forward_equal_the_whole_checkpoints(messages, steps, data):
    """A table that checkpoints its changes, and a twin that checkpoints whole, over the
    same messages and boundaries: the first whole checkpoint rolled forward by each
    later changes is each later whole checkpoint, rows and counters; the changes hold
    only the keys with messages between the two checkpoints."""
    times = (np.cumsum(steps) * INTERVAL).tolist()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(messages)), min_size=len(times), max_size=len(times))))
    batches = data.draw(st.lists(st.integers(1, 20), max_size=6), label="batches")
    changing, whole = table_of(), table_of()
    position, rolled, first, chain = 0, None, None, []
    for t, cut in zip(times, cuts):
        for table in (changing, whole):
            apply(table, messages[position:cut], batches)
        changed = {m[0] for m in messages[:cut] if rolled is not None and rolled.checkpoint_ms <= m[1] < t}
        position = cut
        expected = decode_table(whole.checkpoint(t), Sum(), INTERVAL)
        if rolled is None:
            rolled = decode_table(changing.checkpoint(t), Sum(), INTERVAL)
            first, by_keys, with_ids = rolled.copy(), rolled.copy(), rolled.copy()
        else:
            data = changing.checkpoint_changes(t)
            changes = decode_table(data, Sum(), INTERVAL)
            assert set(changes.keys.tolist()) == changed
            rolled.roll_forward(changes)
            by_keys.roll_forward(decode_table(_as_format_3(data), Sum(), INTERVAL))
            totals(with_ids)  # the keys hashed, as a table that took updates has them
            with_ids.roll_forward(changes)
            chain.append(changes)
        for table in (rolled, by_keys, with_ids):
            assert rows(table) == rows(expected)
            assert (table.checkpoint_ms, table.emitted_ms, table.late_count) == (
                expected.checkpoint_ms, expected.emitted_ms, expected.late_count)
        assert rolled.chain_rows == changing.chain_rows == sum(map(len, chain))
    # The keys new in the changes took ids of their own: an update finds each key's row.
    more = [(m[0], times[-1] + 1, 1) for m in messages]
    for table in (with_ids, expected):
        apply(table, more)
    assert totals(with_ids) == totals(expected)
    # The whole chain at once, as a restore reads it: the same rows, in the same order.
    first.roll_forward(*chain)
    assert (first.keys.tolist(), first.values.tolist(), first.checkpoint_ms, first.chain_rows) == (
        rolled.keys.tolist(), rolled.values.tolist(), rolled.checkpoint_ms, rolled.chain_rows)
    assert (changing.whole_ms, whole.whole_ms, whole.chain_rows) == (times[0], times[-1], 0)


def test_changes_roll_forward_only_the_checkpoint_they_were_taken_on():
    table = table_of()
    apply(table, [("a", 10, 1), ("b", 150, 2)])
    first = decode_table(table.checkpoint(100), Sum(), INTERVAL)
    apply(table, [("c", 210, 3)])
    changes = decode_table(table.checkpoint_changes(200), Sum(), INTERVAL)
    with pytest.raises(CorruptCheckpointError, match="checkpoint at 200 ms do not follow the checkpoint at 300"):
        decode_table(table.checkpoint(300), Sum(), INTERVAL).roll_forward(changes)
    live = table_of()
    apply(live, [("a", 10, 1), ("z", 150, 1)])
    with pytest.raises(CorruptCheckpointError, match="do not follow"):
        live.roll_forward(changes)  # a live table, with rows after its checkpoint
    with pytest.raises(CorruptCheckpointError, match="at 200 ms do not follow the checkpoint at 200 ms"):
        changes.copy().roll_forward(changes)  # the same time
    later = table_of()
    apply(later, [("x", 10, 1), ("y", 450, 1)])
    later.checkpoint(400)
    with pytest.raises(CorruptCheckpointError, match="at 400 ms do not follow the checkpoint at 100"):
        first.copy().roll_forward(decode_table(later.encode(), Sum(), INTERVAL))  # y's row is after 400
    first.roll_forward(changes)
    assert totals(first) == {"a": 1, "b": 2}


def test_a_copy_and_its_table_commit_other_keys_in_the_same_rows_and_each_finds_its_own():
    """A batch finds its keys' committed rows by their ids, kept from batch to batch
    (``KeyedTable._committed_row_of``); a copy keeps its own."""
    table = table_of()
    apply(table, [(key, 10, 1) for key in "abcdefgh"])
    table.checkpoint(100)
    apply(table, [("i", 110, 1)])
    table.checkpoint(200)
    apply(table, [("j", 210, 1)])
    table.checkpoint(300)
    apply(table, [("a", 310, 1)])  # the committed rows found by id, with room for more ids
    other = table.copy()
    for one, key in ((table, "x"), (other, "y")):
        apply(one, [(key, 320, 1)])
        one.checkpoint(400)  # x, then y, committed in row 10
        apply(one, [("a", 410, 1)])
    for one in (table, other):
        apply(one, [("x", 420, 10), ("y", 430, 100)])
    held = {key: 1 for key in "bcdefghij"} | {"a": 3}
    assert totals(table) == held | {"x": 11, "y": 100}
    assert totals(other) == held | {"x": 10, "y": 101}


def test_the_table_a_savepoint_gives_back_finds_no_key_by_the_rows_committed_after_it():
    """Absorbed keys are committed rows without a checkpoint: the table given back
    holds none of them, and a batch finds none of its keys there."""
    table = table_of()
    apply(table, [("a", 10, 1), ("b", 20, 1)])
    table.checkpoint(100)
    apply(table.copy(), [("x", 110, 1)])  # x takes an id of the keys the copies share
    apply(table, [("a", 110, 1)])
    table.checkpoint(200)
    other = table_of()
    apply(other, [("x", 50, 1)])
    for t in (100, 200):
        other.checkpoint(t)
    back = table.savepoint()
    table.absorb(other)  # x committed in row 2
    apply(table, [("a", 210, 1)])  # x's committed row found by its id
    table = back()
    apply(table, [("y", 220, 5), ("x", 230, 5)])
    assert totals(table) == {"a": 2, "b": 1, "y": 5, "x": 5}


def _as_format_3(data: bytes) -> bytes:
    """Changes to a checkpoint as format 3 wrote them: without the rows of the keys it held."""
    version, sections = codec.unpack(b"PKTB", (4,), data, "changes")
    return codec.pack(b"PKTB", 3, sections[:6])


def test_changes_that_name_rows_of_other_keys_or_past_the_checkpoint_are_refused_and_change_nothing():
    table = table_of()
    apply(table, [("a", 10, 1), ("b", 20, 1)])
    checkpoint = decode_table(table.checkpoint(100), Sum(), INTERVAL)
    apply(table, [("b", 150, 1), ("c", 160, 1)])
    data = table.checkpoint_changes(200)
    version, sections = codec.unpack(b"PKTB", (4,), data, "changes")
    assert codec.ints_from_bytes(sections[6]).tolist() == [1]  # b's row; c is new
    before = rows(checkpoint)
    past = "name rows that the checkpoint they change does not have"
    for held, match in (([0], "name rows of other keys"), ([2], past), ([-1], past)):
        named = _repack([*sections[:6], codec.ints_to_bytes(np.array(held))])
        with pytest.raises(CorruptCheckpointError, match=f"^the changes of the checkpoint at 200 ms {match}"):
            checkpoint.roll_forward(decode_table(named, Sum(), INTERVAL))
        assert rows(checkpoint) == before
    checkpoint.roll_forward(decode_table(data, Sum(), INTERVAL))
    assert totals(checkpoint) == {"a": 1, "b": 2, "c": 1}


@pytest.mark.parametrize("held", [[False], [True, False]], ids=["new", "named"])
def test_changes_or_rows_since_of_keys_of_another_kind_than_the_checkpoints_are_refused(held):
    """A checkpoint of bool keys is not the one a table of numbers took, even where
    Python's equality makes the keys one (``True`` and ``1``): they would take the
    rows, or the ids, of the keys held."""
    table = table_of()
    apply(table, [(1, 10, 1), (2, 20, 1)])
    data = table.checkpoint(100)
    checkpoint = decode_table(data, Sum(), INTERVAL)
    other = table_of()
    apply(other, [(key, 10 + i, 4) for i, key in enumerate(held)])
    other.checkpoint(100)
    apply(other, [(True, 150, 8)])
    since = decode_table(other.encode_since_checkpoint(), Sum(), INTERVAL)
    changes = decode_table(other.checkpoint_changes(200), Sum(), INTERVAL)
    assert (changes.held_rows.tolist() == [0]) is (held[0] is True)
    before = rows(checkpoint)
    with pytest.raises(CorruptCheckpointError, match=r"^the changes of the checkpoint at 200 ms hold bool keys "
                                                     r"\(True\), the checkpoint they change numeric keys"):
        checkpoint.roll_forward(changes)
    assert rows(checkpoint) == before
    restored = table_of()
    restored.recover(100, data)
    with pytest.raises(CorruptCheckpointError, match=r"^the rows since the checkpoint at 100 ms hold bool keys "
                                                     r"\(True\), the checkpoint they follow numeric keys"):
        restored.follow(since)
    assert rows(restored) == before


def test_the_changes_hold_the_keys_with_messages_between_the_two_checkpoints_only():
    table = table_of()
    apply(table, [("a", 10, 1), ("b", 20, 1)])
    checkpoint = decode_table(table.checkpoint(100), Sum(), INTERVAL)
    apply(table, [("a", 150, 1), ("b", 250, 1), ("c", 260, 1), ("e", 120, 1)])  # b and c after the next one
    changes = decode_table(table.checkpoint_changes(200), Sum(), INTERVAL)
    assert changes.keys.tolist() == ["a", "e"]
    checkpoint.roll_forward(changes)
    assert totals(checkpoint) == {"a": 2, "b": 1, "e": 1}
    # A checkpoint rolled forward is a table like any decoded one: it takes updates and
    # says which keys they touched.
    apply(checkpoint, [("b", 210, 5), ("d", 220, 1)])
    assert dict(zip(*(part.tolist() for part in checkpoint.take_touched_totals()))) == {"b": 6, "d": 1}


@pytest.mark.parametrize("made", [
    lambda: KeyedTable(Sum(), INTERVAL, Window(200)),
    lambda: KeyedTable(Sum(), INTERVAL, ttl_ms=500),
    lambda: SessionTable(Sum(), INTERVAL, SessionWindow(300)),
], ids=["window", "ttl", "sessions"])
def test_tables_with_windows_or_a_time_to_live_checkpoint_whole(made):
    table = made()
    assert not table.keeps_changes
    with pytest.raises(StateValueError, match="^a table with a window or a ttl_ms checkpoints whole$"):
        table.checkpoint_changes(100)


# -- encoding ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "keys",
    [
        ["a", "b", "é", ""],
        [1, -5, 2**62, 0],
        [None, None, None, None],
        ["a", None, "b", "a"],
    ],
)
def test_encode_decode_round_trips_rows_and_counters(keys):
    window = Window(300, 100)
    table = table_of(Sum(float), interval=200, window=window)
    apply(table, [(k, 100 * i + 7, float(i)) for i, k in enumerate(keys * 3)])
    table.close_windows(450)
    table.checkpoint(400)
    apply(table, [(keys[0], 10, 1.0)])  # late
    decoded = decode_table(table.encode(), Sum(float), 200, window)
    assert state_of(decoded) == state_of(table)
    assert (decoded.checkpoint_ms, decoded.emitted_ms, decoded.late_count) == (400, 450, 1)
    assert decoded.encode() == table.encode()


def test_integer_keys_beside_a_null_key_decode_as_the_same_integers():
    # Arrow's integers with a null become floats in numpy: 2**60 and 2**60 + 1 one key.
    table = table_of()
    apply(table, [(2**60, 10, 1), (2**60 + 1, 20, 2), (None, 30, 4), (7, 40, 8)])
    decoded = decode_table(table.checkpoint(200), Sum(), INTERVAL)
    assert [(type(key), key) for key in decoded.keys] == [(int, 2**60), (int, 2**60 + 1), (type(None), None), (int, 7)]
    apply(decoded, [(None, 210, 16)])
    assert decoded.take_touched_totals()[0].tolist() == [None]


def test_encode_decode_of_an_empty_table():
    decoded = decode_table(table_of().encode(), Sum(), INTERVAL)
    assert len(decoded) == 0 and totals(decoded) == {}


def test_encode_keeps_rows_after_the_last_checkpoint_and_checkpoint_does_not():
    table = table_of()
    apply(table, [("a", 10, 1), ("a", 250, 2)])
    data = table.checkpoint(200)
    assert totals(decode_table(table.encode(), Sum(), INTERVAL)) == {"a": 3}
    assert totals(decode_table(data, Sum(), INTERVAL)) == {"a": 1}


def _sample_bytes() -> bytes:
    table = table_of()
    apply(table, [("a", 10, 1), ("b", 120, 2), ("a", 130, 3)])
    table.checkpoint(100)
    apply(table, [("c", 20, 1)])
    return table.encode()


def _sections() -> list[bytes]:
    version, sections = codec.unpack(b"PKTB", (4,), _sample_bytes(), "test")
    return sections


def _repack(sections, version=4) -> bytes:
    return codec.pack(b"PKTB", version, sections)


def _corruptions():
    data = _sample_bytes()
    meta, keys, buckets, values, description, times, held = _sections()
    yield "empty", b""
    yield "header only", data[:10]
    for cut in (1, 9, len(data) // 2, len(data) - 1):
        yield f"truncated by {cut}", data[:-cut]
    yield "trailing bytes", data + b"\0"
    yield "another magic", b"XXXX" + data[4:]
    yield "another version", data[:4] + b"\x00\x09" + data[6:]
    yield "six sections", _repack([meta, keys, buckets, values, description, times])
    yield "eight sections", _repack([meta, keys, buckets, values, description, times, held, b""])
    yield "format 3 with seven sections", _repack([meta, keys, buckets, values, description, times, held], version=3)
    yield "format 2 with six sections", _repack([meta, keys, buckets, values, description, times], version=2)
    yield "format 1 with five sections", _repack([meta, keys, buckets, values, description], version=1)
    yield "meta of three numbers", _repack([meta[:24], keys, buckets, values, description, times, held])
    yield "torn meta", _repack([meta[:20], keys, buckets, values, description, times, held])
    yield "keys not arrow", _repack([meta, b"not an arrow stream at all", buckets, values, description, times, held])
    yield "torn buckets", _repack([meta, keys, buckets[:-3], values, description, times, held])
    yield "one bucket short", _repack([meta, keys, buckets[:-8], values, description, times, held])
    other_values = Max().encode_column(np.array([1, 2, 3]))
    yield "values of another monoid", _repack([meta, keys, buckets, other_values, description, times, held])
    yield "torn values", _repack([meta, keys, buckets, values[:-3], description, times, held])
    yield "torn times", _repack([meta, keys, buckets, values, description, b"\0\0\0", held])
    yield "torn rows held", _repack([meta, keys, buckets, values, description, times, b"\0\0\0"])
    yield "more rows held than keys", _repack([meta, keys, buckets, values, description, times, b"\0" * 8 * 5])


@pytest.mark.parametrize(("what", "data"), list(_corruptions()), ids=[w for w, _ in _corruptions()])
def test_decoding_damaged_bytes_raises_corrupt_checkpoint_error_naming_them(what, data):
    with pytest.raises(CorruptCheckpointError, match="^checkpoint X: "):
        decode_table(data, Sum(), INTERVAL, what="checkpoint X")


def test_times_of_another_length_than_the_rows_are_damage_and_no_times_are_a_table_without_ttl():
    expiring = KeyedTable(Sum(), INTERVAL, ttl_ms=500)
    apply(expiring, [("a", 10, 1), ("b", 20, 2)])
    *columns, times, held = codec.unpack(b"PKTB", (4,), expiring.encode(), "test")[1]
    with pytest.raises(CorruptCheckpointError, match="^checkpoint X: columns differ in length"):
        decode_table(_repack([*columns, times[:-8], held]), Sum(), INTERVAL, what="checkpoint X", ttl_ms=500)
    with pytest.raises(StateValueError, match="written without ttl_ms, and cannot be read with ttl_ms=500"):
        decode_table(_repack(columns, version=2), Sum(), INTERVAL, ttl_ms=500)  # format 2 has no times


@pytest.mark.parametrize(("what", "data"), list(_corruptions())[:6], ids=[w for w, _ in _corruptions()][:6])
def test_recovering_damaged_bytes_raises_and_keeps_the_state(what, data):
    table = table_of()
    apply(table, [("z", 10, 5)])
    before = state_of(table)
    with pytest.raises(CorruptCheckpointError, match="^checkpoint at 100: "):
        table.recover(100, data)
    assert state_of(table) == before


@pytest.mark.parametrize(
    ("interval", "window"),
    [(50, None), (200, None), (100, Window(300, 50)), (1000, Window(250, 50))],
)
def test_decoding_bytes_written_with_another_bucket_size_raises(interval, window):
    with pytest.raises(CorruptCheckpointError, match=r"buckets, this task uses \d+ ms \(the window or checkpoint "
                                                    r"interval changed\)"):
        decode_table(_sample_bytes(), Sum(), interval, window)


@pytest.mark.parametrize(
    ("monoid", "window", "values"),
    [
        (Sum(), None, [1, 2, 4]),
        (monoids.Averaged(), Window(300, 100), [monoids.Averaged().prepare(v) for v in (1.0, 2.0, 4.0)]),
        (monoids.MapMonoid(Max(float)), Window(200), [{"x": 1.0}, {"y": 2.0}, {"x": 4.0}]),
    ],
    ids=["sum", "averaged-sliding", "map-tumbling"],
)
def test_read_decodes_a_checkpoint_without_the_task_from_what_it_names(monoid, window, values):
    table = table_of(monoid, window=window)
    apply(table, [("a", 10, values[0]), ("b", 120, values[1]), ("a", 250, values[2])])
    data = table.checkpoint(200)
    read = read_table(data, "checkpoint")
    assert (read.monoid, read.window, read.interval_ms, len(read)) == (monoid, window, INTERVAL, 2)
    assert state_of(read) == state_of(decode_table(data, monoid, INTERVAL, window))


def test_a_checkpoint_of_quantiles_is_recovered_whatever_ranks_either_side_presents():
    median, tails = monoids.Quantiles(), monoids.Quantiles(ranks=(0.01, 0.99))
    table = table_of(median)
    apply(table, [("a", t, median.prepare(float(t))) for t in range(0, 200, 2)])
    data = table.checkpoint(200)
    recovered = table_of(tails)
    recovered.recover(200, data)
    keys, column = recovered.totals()
    assert keys.tolist() == ["a"] and median.equivalent(column[0], table.get("a"))
    assert tails.present_column(column).tolist() == [{0.01: 2.0, 0.99: 198.0}]
    read = read_table(data, "checkpoint")
    assert read.monoid.ranks == (0.5,) and read.monoid.present_column(read.totals()[1]).tolist() == [100.0]


def test_format_2_bytes_are_still_decoded_and_read():
    meta, keys, buckets, values, description, *_ = _sections()
    old = _repack([meta, keys, buckets, values, description], version=2)
    current = decode_table(_sample_bytes(), Sum(), INTERVAL)
    assert len(current) and state_of(decode_table(old, Sum(), INTERVAL)) == state_of(current)
    assert state_of(read_table(old, "old checkpoint")) == state_of(current)


def test_format_1_bytes_are_still_decoded_but_not_read_without_the_task():
    meta, keys, buckets, values, *_ = _sections()
    old = _repack([meta, keys, buckets, values], version=1)
    current = decode_table(_sample_bytes(), Sum(), INTERVAL)
    assert len(current) and state_of(decode_table(old, Sum(), INTERVAL)) == state_of(current)
    with pytest.raises(StateValueError, match=r"format 1, which does not name its monoid; decode it with the "
                                              r"task's monoid and window \(state.tables.decode_table\)$"):
        read_table(old, "old checkpoint")


@pytest.mark.parametrize(
    ("description", "error", "message"),
    [
        (b"not json", CorruptCheckpointError, "description of the table is unreadable"),
        (b'{"monoid": {"name": "sum", "version": 1, "params": {}}}', CorruptCheckpointError, "interval_ms"),
        (
            b'{"interval_ms": 100, "window": {"size_ms": -5}, "monoid": {}}',
            CorruptCheckpointError,
            "description of the table is unreadable",
        ),
        (
            b'{"interval_ms": 100, "window": null, "monoid": {"name": "gone", "version": 1, "params": {}}}',
            StateValueError,
            "no monoid named 'gone'",
        ),
        (
            b'{"interval_ms": 100, "window": null, "monoid": {"name": "sum", "version": 1, "params": {}}, "ttl_ms": 0}',
            CorruptCheckpointError,
            "the description: ttl_ms must be an int of milliseconds > 0",
        ),
    ],
)
def test_read_of_a_damaged_or_unknown_description_raises_naming_the_table(description, error, message):
    meta, keys, buckets, values, _, times, held = _sections()
    with pytest.raises(error, match=message) as raised:
        read_table(_repack([meta, keys, buckets, values, description, times, held]), "checkpoint X")
    assert "checkpoint X" in str(raised.value)


def test_decoding_bytes_of_another_monoid_raises():
    with pytest.raises(CorruptCheckpointError, match="sum"):
        decode_table(_sample_bytes(), Count(), INTERVAL)
    with pytest.raises(CorruptCheckpointError):
        decode_table(_sample_bytes(), Sum(float), INTERVAL)


# -- non-commutative monoids ---------------------------------------------------------


class Concat(Monoid):
    """Tuples, concatenated: the simplest monoid where order shows."""

    name = "test-concat"
    commutative = False

    def zero(self):
        return ()

    def plus(self, a, b):
        return a + b

    def validate(self, value, where=""):
        if not isinstance(value, tuple):
            raise MonoidTypeError(f"Concat takes tuples, got {value!r} at {where}")
        return value

    def _encode_payload(self, value):
        return json.dumps(list(value)).encode()

    def _decode_payload(self, data):
        return tuple(json.loads(data))


def test_a_non_commutative_monoid_is_folded_in_time_order_across_buckets():
    table = table_of(Concat())
    apply(table, [("k", 250, ("c",)), ("k", 50, ("a",)), ("j", 120, ("x",))])
    apply(table, [("k", 150, ("b",)), ("k", 260, ("d",)), ("k", 10, ("a2",))])
    # buckets in time order; within a bucket, message order
    assert totals(table) == {"k": ("a", "a2", "b", "c", "d"), "j": ("x",)}
    assert table.get("k") == ("a", "a2", "b", "c", "d")


def test_a_non_commutative_monoid_keeps_time_order_through_checkpoints_and_recovery():
    table = table_of(Concat())
    apply(table, [("k", 250, ("c",)), ("k", 50, ("a",)), ("k", 150, ("b",))])
    data = table.checkpoint(200)
    apply(table, [("k", 210, ("d",)), ("k", 450, ("f",)), ("k", 300, ("e",))])
    assert totals(table) == {"k": ("a", "b", "c", "d", "e", "f")}
    recovered = table_of(Concat())
    recovered.recover(200, data)
    apply(recovered, [("k", 250, ("c",)), ("k", 210, ("d",)), ("k", 450, ("f",)), ("k", 300, ("e",))])
    assert totals(recovered) == totals(table)
    decoded = decode_table(table.encode(), Concat(), INTERVAL)
    assert totals(decoded) == totals(table)


@pytest.mark.parametrize("name", ["First", "Last"])
def test_first_and_last_break_ties_in_time_order_across_buckets(name):
    monoid, stamped = getattr(monoids, name)(), monoids.Timestamped
    assert not monoid.commutative
    table = table_of(monoid)
    # equal user timestamps: the message time decides, not the arrival order
    apply(table, [("k", 150, stamped(5, "late-bucket")), ("k", 50, stamped(5, "early-bucket"))])
    expected = "early-bucket" if name == "First" else "late-bucket"
    assert table.get("k").item == expected
    table.checkpoint(100)
    assert table.get("k").item == expected


@pytest.mark.parametrize("name", ["First", "Last"])
def test_a_non_commutative_tables_changes_roll_forward_to_its_whole_checkpoint(name):
    """Its seal puts a key's rows in time order, which renumbers the keys: z's first row
    came before y's, and after the seal y's committed row comes before z's open one."""
    monoid, stamped = getattr(monoids, name)(), monoids.Timestamped
    changing, whole = table_of(monoid), table_of(monoid)
    for table in (changing, whole):
        apply(table, [("a", 10, stamped(1, "a1")), ("b", 20, stamped(2, "b1"))])
    rolled = decode_table(changing.checkpoint(100), monoid, INTERVAL)
    whole.checkpoint(100)
    for table in (changing, whole):
        apply(table, [("z", 250, stamped(3, "z1")), ("y", 150, stamped(4, "y1")), ("b", 160, stamped(2, "b2"))])
    changes = decode_table(changing.checkpoint_changes(200), monoid, INTERVAL)
    assert changes.keys.tolist() == ["b", "y"]
    rolled.roll_forward(changes)
    assert totals(rolled) == totals(decode_table(whole.checkpoint(200), monoid, INTERVAL))


# -- moving keys between tables (rescaling key groups) -------------------------------


def window_table(messages):
    table = KeyedTable(Sum(), 100, Window(300, 100))
    table.update(np.array([k for k, _, _ in messages], dtype=object), np.array([t for _, t, _ in messages]),
                 np.array([v for _, _, v in messages]))
    return table


def test_keys_moved_into_another_table_keep_their_windows_exactly():
    messages = [(f"k{i % 5}", i * 7 % 600, i) for i in range(200)]
    whole = window_table(messages)
    whole.checkpoint(400)
    mine, theirs = np.array(["k0", "k3"], dtype=object), np.array(["k1", "k2", "k4"], dtype=object)
    moved = whole.only(mine)
    moved.absorb(whole.only(theirs))
    assert len(moved) == len(whole) and moved.late_count == 0
    restored = KeyedTable(Sum(), 100, Window(300, 100))
    restored.recover(400, moved.encode())
    closed, expected = restored.close_windows(700), whole.copy().close_windows(700)
    got = sorted(zip(closed.keys, closed.starts_ms.tolist(), closed.values.tolist()))
    assert got == sorted(zip(expected.keys, expected.starts_ms.tolist(), expected.values.tolist())) and got


def test_keys_of_a_list_are_moved_as_they_are_and_absorbed_with_their_late_counts():
    table = table_of()
    apply(table, [(8, 10, 1), (7, 20, 2), (9, 30, 4)])
    moved = table.only(["8", 7])  # a list: 7 stays an int, "8" a string, not the key 8
    assert totals(moved) == {7: 2} == totals(table, ["8", 7])
    late, more_late = table_of(), table_of()
    for one, count in ((late, 2), (more_late, 3)):
        one.checkpoint(100)
        apply(one, [("late", 50, 1)] * count)
    late.absorb(more_late)
    assert late.late_count == 5


def test_a_windowed_table_without_rows_has_no_open_windows_and_keeps_no_touched_keys():
    table = table_of(window=Window(200, 100))
    assert len(table.open_windows()) == 0
    closed = table.close_windows(500)
    assert [(len(column), column.dtype) for column in (closed.keys, closed.starts_ms, closed.ends_ms)] == [
        (0, object), (0, np.int64), (0, np.int64)]
    assert len(closed.values) == 0
    with pytest.raises(StateValueError,
                       match="^a table with a window keeps no touched keys: its results are its windows$"):
        table.take_touched_totals()


def test_a_watermark_that_is_no_time_is_refused_naming_it():
    with pytest.raises(StateValueError, match="watermark_ms must be"):
        table_of(window=Window(200, 100)).close_windows(-1)


def test_a_table_of_another_checkpoint_is_not_absorbed():
    early, late = window_table([("a", 10, 1)]), window_table([("b", 10, 1)])
    early.checkpoint(100)
    late.checkpoint(200)
    with pytest.raises(StateValueError, match="checkpointed at 200 ms .* into one at 100 ms"):
        early.absorb(late)


@pytest.mark.parametrize("window", [None, Window(200, 100)], ids=["running", "windowed"])
def test_a_checkpoint_and_the_rows_since_it_make_the_table_again(window):
    table = KeyedTable(Sum(), INTERVAL, window)
    apply(table, [("a", 10, 1), ("b", 120, 2), ("a", 150, 4)])
    checkpoint = table.checkpoint(100)
    apply(table, [("a", 260, 8), ("c", 110, 16), ("b", 30, 32)])  # b at 30 is late
    if window:
        table.close_windows(200)
    since = decode_table(table.encode_since_checkpoint(), Sum(), INTERVAL, window)
    assert since.buckets.min() >= 100
    again = KeyedTable(Sum(), INTERVAL, window)
    again.recover(100, checkpoint)
    again.follow(since)
    assert state_of(again) == state_of(table)
    assert again.late_count == 1


def test_rows_that_do_not_follow_the_checkpoint_are_refused():
    table = table_of()
    apply(table, [("a", 10, 1), ("a", 150, 2)])
    checkpoint = table.checkpoint(100)
    restored = table_of()
    restored.recover(100, checkpoint)
    with pytest.raises(CorruptCheckpointError, match="do not follow the checkpoint at 100 ms"):
        restored.follow(decode_table(table.encode(), Sum(), INTERVAL))  # holds the rows before 100 too
    later = table.copy()
    later.checkpoint(200)
    with pytest.raises(CorruptCheckpointError, match="since the checkpoint at 200 ms"):
        restored.follow(decode_table(later.encode_since_checkpoint(), Sum(), INTERVAL))
    assert state_of(restored) == state_of(decode_table(checkpoint, Sum(), INTERVAL))


def test_only_a_table_whose_keys_never_expire_follows_its_checkpoints():
    assert table_of().follows_checkpoints and KeyedTable(Sum(), INTERVAL, Window(200, 100)).follows_checkpoints
    assert not KeyedTable(Sum(), INTERVAL, ttl_ms=500).follows_checkpoints


# -- keys that expire (ttl_ms) -------------------------------------------------------------


def test_a_key_expires_only_when_its_newest_message_is_more_than_ttl_behind_the_watermark():
    table = KeyedTable(Sum(), INTERVAL, ttl_ms=500)
    apply(table, [("a", 900, 1), ("a", 1000, 2), ("a", 950, 4), ("b", 1001, 8)])
    assert table.expire(1400) == 0  # no row is stale
    assert table.expire(1500) == 0 and totals(table) == {"a": 7, "b": 8}  # only a's older row is
    assert table.expire(1501) == 1 and totals(table) == {"b": 8}
    assert table.get("a") == 0
    table.take_touched_totals()
    apply(table, [("a", 1600, 16)])  # starts from zero, as a new key
    assert totals(table) == {"a": 16, "b": 8}
    assert table.take_touched_totals()[0].tolist() == ["a"]


def test_a_message_more_than_ttl_after_its_keys_previous_one_starts_it_from_zero():
    table = KeyedTable(Concat(), INTERVAL, ttl_ms=100)
    apply(table, [("a", 10, ("x",)), ("b", 10, ("p",))])
    table.checkpoint(100)  # a's first message is committed, the restart drops it too
    apply(table, [("a", 150, ("y",)), ("a", 110, ("z",)), ("a", 261, ("w",)), ("a", 261, ("v",)),
                  ("a", 300, ("u",)), ("b", 110, ("q",))])
    # a: 10 -> 110 is 100 ms (kept), 150 -> 261 is 111 ms (restart); equal times stay together.
    assert totals(table) == {"a": ("w", "v", "u"), "b": ("p", "q")}
    assert min(table.times[table.keys == "a"]) == 261


def test_each_keys_messages_are_measured_against_its_own_previous_message_from_time_0_on():
    table = KeyedTable(Sum(), INTERVAL, ttl_ms=100)
    apply(table, [("a", 0, 1), ("b", 0, 2)])
    apply(table, [("b", 200, 4), ("b", 250, 8), ("a", 150, 16), ("c", 160, 32)])
    # a: 0 -> 150 restarts; b: 0 -> 200 restarts, 200 -> 250 does not.
    assert totals(table) == {"a": 16, "b": 12, "c": 32}


def test_a_table_without_ttl_never_expires():
    table = table_of()
    apply(table, [("a", 1, 1)])
    assert table.expire(10**12) == 0 and totals(table) == {"a": 1}


@given(
    st.lists(st.tuples(st.sampled_from("abcde"), st.integers(0, 60), st.integers(0, 9)), max_size=40),
    st.integers(1, 400),
)
@settings(max_examples=examples(60))
def test_expiry_with_checkpoints_between_equals_a_per_key_model(steps, ttl):
    """Each step sends one message per key listed, then advances the watermark by 100 ms;
    a message more than ``ttl`` after its key's newest one starts the key from zero."""
    table = KeyedTable(Sum(), INTERVAL, ttl_ms=ttl)
    model: dict = {}  # key -> (total, newest time)
    watermark = 0
    for key, offset, value in steps:
        ts = watermark + offset
        apply(table, [(key, ts, value)])
        total, newest = model.get(key, (0, ts))
        if ts - newest > ttl:
            total = 0
        model[key] = (total + value, max(newest, ts))
        watermark += 100
        if table.due_checkpoint(watermark):
            table.checkpoint(table.due_checkpoint(watermark))
        table.expire(watermark)
        model = {k: (t, n) for k, (t, n) in model.items() if watermark - n <= ttl}
        assert totals(table) == {k: t for k, (t, _) in model.items()}


def test_message_times_survive_a_checkpoint_so_a_recovered_table_expires_the_same_keys():
    table = KeyedTable(Sum(), INTERVAL, ttl_ms=300)
    apply(table, [("a", 10, 1), ("b", 150, 2), ("a", 90, 4), ("c", 260, 8)])
    data = table.checkpoint(200)
    recovered = KeyedTable(Sum(), INTERVAL, ttl_ms=300)
    recovered.recover(200, data)
    for watermark in (390, 391, 450, 451):
        assert recovered.expire(watermark) == table.expire(watermark)
        assert totals(recovered) == {k: v for k, v in totals(table).items() if k != "c"}
    assert totals(recovered) == {}
    read = read_table(data, "checkpoint")
    assert read.ttl_ms == 300 and read.times.tolist() == [90, 150]


def test_describe_names_ttl_only_when_keys_expire():
    assert "ttl_ms" not in describe(Sum(), INTERVAL, None)
    assert describe(Sum(), INTERVAL, None, 1000)["ttl_ms"] == 1000


def test_a_table_written_without_ttl_cannot_be_read_with_one_but_the_reverse_can():
    plain = table_of()
    apply(plain, [("a", 10, 1)])
    with pytest.raises(StateValueError, match="written without ttl_ms, and cannot be read with ttl_ms=50"):
        decode_table(plain.encode(), Sum(), INTERVAL, ttl_ms=50)
    expiring = KeyedTable(Sum(), INTERVAL, ttl_ms=50)
    apply(expiring, [("a", 10, 1)])
    assert totals(decode_table(expiring.encode(), Sum(), INTERVAL)) == {"a": 1}


@pytest.mark.parametrize("ttl", [0, -5, 1.5, True, "1000"])
def test_a_ttl_that_is_not_a_positive_int_is_refused_naming_it(ttl):
    with pytest.raises(StateValueError, match=f"^KeyedTable: ttl_ms must be an int of milliseconds > 0, got {ttl!r}"):
        KeyedTable(Sum(), INTERVAL, ttl_ms=ttl)


def test_a_windowed_table_takes_no_ttl():
    with pytest.raises(StateValueError, match="ttl_ms=100 with window .*: windows close by themselves, only a table "
                                              "without a window expires keys$"):
        KeyedTable(Sum(), INTERVAL, Window(200), ttl_ms=100)


@pytest.mark.parametrize("kind, window", [(KeyedTable, SessionWindow(30)), (SessionTable, Window(200))])
def test_a_table_of_another_kind_of_window_is_refused_saying_how_to_build_one(kind, window):
    with pytest.raises(StateValueError, match=f"^{kind.__name__} cannot keep .*: build tables with "
                                              "state.tables.table_for$"):
        kind(Sum(), INTERVAL, window)


@pytest.mark.parametrize("time_at", [KeyedTable.due_checkpoint, KeyedTable.expire])
def test_a_watermark_to_check_that_is_no_time_is_refused_naming_it(time_at):
    with pytest.raises(StateValueError, match="watermark_ms must be"):
        time_at(KeyedTable(Sum(), INTERVAL, ttl_ms=100), -1)


def _key_id(key) -> str:
    """A key's identity as ``factorize_keys`` sees it: None and NaN are one null key."""
    return "null" if pd.isna(key) else repr(key)


_null = st.one_of(st.none(), st.just(float("nan")))


@given(st.sampled_from([st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 2)]).flatmap(
           lambda keys: st.lists(st.tuples(st.one_of(keys, _null), st.integers(0, 30)), min_size=1, max_size=40)),
       st.lists(st.one_of(st.sampled_from(["a", "b", "e"]), _null, st.integers(0, 3)), max_size=8))
def test_totals_of_some_keys_are_those_of_all_keys_picked_in_table_order(messages, wanted):
    """Of a table of str or of integer keys beside the null key, keys of either kind wanted."""
    table = KeyedTable(Sum(), 10)
    keys, stamps = zip(*messages)
    table.update(np.array(keys, dtype=object), np.array(stamps, dtype=np.int64), [1] * len(keys))
    all_keys, all_values = table.totals()
    index = {_key_id(k): i for i, k in enumerate(all_keys.tolist())}
    expected = [i for i in range(len(all_keys)) if _key_id(all_keys[i]) in {_key_id(w) for w in wanted}]
    found, values = table.totals(np.array(wanted, dtype=object))
    assert [repr(k) for k in found.tolist()] == [repr(all_keys[i]) for i in expected]
    assert values.tolist() == [all_values[index[_key_id(k)]] for k in found.tolist()]


def test_totals_of_none_and_nan_are_those_of_the_one_null_key():
    table = table_of()
    apply(table, [("a", 10, 1), (None, 20, 2), ("b", 30, 4), (float("nan"), 40, 8)])
    assert totals(table, [None, float("nan")]) == {None: 10}
    assert totals(table, [float("nan"), None, "b"]) == {None: 10, "b": 4}


# -- key codes kept with the table ---------------------------------------------------


def _twin_without_codes(table: KeyedTable) -> KeyedTable:
    """The same table, made to hash its keys for whatever it does next."""
    twin = table.copy()
    twin._codes = None
    return twin


def _twin_decoded(table: KeyedTable) -> KeyedTable:
    return decode_table(table.encode(), table.monoid, table.interval_ms, table.window, ttl_ms=table.ttl_ms)


def _tables():
    from state.tables import table_for
    from state.window import SessionWindow

    return {
        "sum": lambda: KeyedTable(Sum(), INTERVAL),
        "ttl": lambda: KeyedTable(Sum(), INTERVAL, ttl_ms=250),
        "concat": lambda: KeyedTable(Concat(), INTERVAL),
        "concat-ttl": lambda: KeyedTable(Concat(), INTERVAL, ttl_ms=150),
        "window": lambda: KeyedTable(Concat(), INTERVAL, Window(300, 100)),
        "sessions": lambda: table_for(Sum(), INTERVAL, SessionWindow(120)),
    }


def _assert_codes_are_the_keys(table: KeyedTable):
    if table._codes is not None:
        np.testing.assert_array_equal(table._codes, factorize_keys(table.keys)[0])
    if table._touched is not None:
        assert len(table._touched) == len(table.keys)


def _same(a, b):
    """Equal results of two tables: arrays element by element (keys by repr), else ==."""
    if isinstance(a, tuple):
        assert len(a) == len(b) and all(_same(x, y) is None for x, y in zip(a, b))
    elif isinstance(a, np.ndarray):
        assert [repr(x) for x in a.tolist()] == [repr(y) for y in b.tolist()]
    else:
        assert a == b


def test_moved_keys_keep_the_codes_of_their_keys():
    source, target = KeyedTable(Sum(), INTERVAL), KeyedTable(Sum(), INTERVAL)
    source.update(np.array(["a", None, "b", "c", float("nan"), "a"], dtype=object), np.arange(6), [1] * 6)
    target.update(np.array(["x", "y", "x"], dtype=object), np.arange(3), [1] * 3)
    part = source.only(np.array([None, "c"], dtype=object))
    _assert_codes_are_the_keys(part)
    assert totals(part) == {None: 2, "c": 1}
    target.absorb(part)
    _assert_codes_are_the_keys(target)
    assert totals(target) == {"x": 2, "y": 1, None: 2, "c": 1}
    assert target.take_touched_totals()[0].tolist() == ["x", "y"]  # moved, not updated


_operations = st.lists(
    st.tuples(
        st.sampled_from(["update", "undo", "watermark", "checkpoint", "expire", "close", "take", "recover", "totals"]),
        st.lists(st.tuples(st.integers(0, 5), st.integers(-30, 120)), max_size=12),
        st.integers(0, 150),
    ),
    max_size=30,
)


@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(_tables())), st.sampled_from(["str", "int", "decoded"]), _operations)
def test_kept_key_codes_are_the_keys_codes_and_change_nothing_a_table_does(kind, keys, operations):
    """After any operations, a table's codes are those of its keys, and each operation
    gives what it gives on a table that hashes its keys anew (one decoded from bytes, or
    a copy without codes), also for None and NaN keys. The totals of the touched keys are
    those of the keys of the messages on time since the last call."""
    table = _tables()[kind]()
    pool = {"str": ["a", "b", "c", None, "d", "e"], "int": [0, 1, float("nan"), None, 2, 3]}.get(keys, list("abcdef"))
    twin_of = _twin_decoded if keys == "decoded" else _twin_without_codes
    value = (lambda i: (i,)) if isinstance(table.monoid, Concat) else int
    clock, touched, checkpoints = 0, {}, []

    def batch(messages):
        stamps = np.array([max(clock + dt, 0) for _, dt in messages], dtype=np.int64)
        return np.array([pool[k] for k, _ in messages], dtype=object), stamps, [value(i) for i in range(len(messages))]

    for name, messages, step in operations:
        twin, out, twin_out = twin_of(table), None, None
        if name == "update":
            keys_, stamps, values = batch(messages)
            for key, stamp in zip(keys_.tolist(), stamps.tolist()):
                if stamp >= table.sealed_ms:
                    touched.setdefault(_key_id(key), key)
            out, twin_out = table.update(keys_, stamps, values), twin.update(keys_, stamps, values)
        elif name == "undo":  # a batch applied and checkpointed, then undone
            snapshot, before = table.copy(), table.encode()
            table.update(*batch(messages))
            if table.due_checkpoint(clock + step) is not None:
                table.checkpoint(table.due_checkpoint(clock + step))
            table = snapshot
            assert table.encode() == before
        elif name == "watermark":
            clock += step
        elif name == "checkpoint" and table.due_checkpoint(clock) is not None:
            due = table.due_checkpoint(clock)
            out, twin_out = table.checkpoint(due), twin.checkpoint(due)
            checkpoints.append((due, out))
        elif name == "expire":
            out, twin_out = table.expire(clock), twin.expire(clock)
        elif name == "close" and table.window is not None:
            out, twin_out = table.close_windows(clock), twin.close_windows(clock)
            out, twin_out = (out.keys, out.starts_ms, out.values), (twin_out.keys, twin_out.starts_ms, twin_out.values)
        elif name == "take" and table.window is None:
            out = table.take_touched_totals()
            twin_out = twin.totals(np.array(list(touched.values()), dtype=object))
            touched = {}
        elif name == "recover" and checkpoints:
            at, data = checkpoints[-1]
            table.recover(at, data)
            twin.recover(at, data)
            touched, clock = {}, max(clock, at)
        elif name == "totals":
            out, twin_out = table.totals(), twin.totals()
        _same(out, twin_out)
        _assert_codes_are_the_keys(table)
        _assert_codes_are_the_keys(twin)
        assert table.encode() == twin.encode()


def test_two_tables_grown_from_one_snapshot_with_new_keys_each_keep_their_own():
    """Committed keys grow in place (``state.key_column``); a table copied from the same
    snapshot as one that grew must not write over it."""
    snapshot = table_of()
    apply(snapshot, [(f"k{i}", 1, 1) for i in range(20)])
    snapshot.checkpoint(INTERVAL)
    branches = {}
    for name in ("x", "y"):
        table = snapshot.copy()
        apply(table, [(f"{name}{i}", INTERVAL + 1, 10) for i in range(3)])
        table.checkpoint(2 * INTERVAL)
        branches[name] = table
    for name, table in branches.items():
        assert totals(table) == {**{f"k{i}": 1 for i in range(20)}, **{f"{name}{i}": 10 for i in range(3)}}
    assert totals(snapshot) == {f"k{i}": 1 for i in range(20)}


def test_the_checkpointed_rows_are_the_checkpoint_and_go_on_apart_from_the_table():
    table = table_of()
    apply(table, [(f"k{i}", 1, 1) for i in range(20)])
    data = table.checkpoint(INTERVAL)
    apply(table, [("k0", INTERVAL + 1, 5), ("new", INTERVAL + 2, 7)])
    checkpoint, decoded = table.checkpointed_rows(), table_of()
    decoded.recover(INTERVAL, data)
    assert checkpoint.encode() == decoded.encode()
    # Each takes new keys into its committed rows; neither sees the other's.
    apply(checkpoint, [("c", INTERVAL + 3, 100)])
    checkpoint.checkpoint(2 * INTERVAL)
    table.checkpoint(2 * INTERVAL)
    assert totals(checkpoint) == {**{f"k{i}": 1 for i in range(20)}, "c": 100}
    assert totals(table) == {**{f"k{i}": 1 for i in range(20)}, "k0": 6, "new": 7}
    _assert_codes_are_the_keys(checkpoint)


def test_rows_absorbed_after_the_rows_since_the_checkpoint_are_checkpointed_rows_all_the_same():
    """A table that absorbed another's rows (a rescale) after its rows since the
    checkpoint: its checkpointed rows are both tables' rows before it, and the rows
    since it both tables' rows after it, though the first do not come first."""
    table, other = table_of(), table_of()
    apply(table, [("a", 10, 1), ("b", 20, 2)])
    apply(other, [("c", 30, 4)])
    for one, late in ((table, ("a", 150, 8)), (other, ("c", 160, 16))):
        one.checkpoint(INTERVAL)
        apply(one, [late])
    table.absorb(other)
    assert not table.decodes_as_held(following=True)
    assert totals(table.checkpointed_rows()) == {"a": 1, "b": 2, "c": 4}
    assert totals(decode_table(table.encode_since_checkpoint(), Sum(), INTERVAL)) == {"a": 8, "c": 16}


def test_a_null_key_is_one_key_to_get_and_only_whether_none_or_nan():
    """``factorize_keys`` makes None and NaN one key, in different buckets too; so do
    reading one key and moving keys (a rescale moves a numeric key's null as NaN)."""
    table = KeyedTable(Sum(), 100)
    table.update(np.array([None, "a"], dtype=object), np.array([0, 10]), np.array([1, 1]))
    table.update(np.array([float("nan")], dtype=object), np.array([150]), np.array([1]))
    assert len(table) == 3  # (None, 0), ("a", 0), (NaN, 100)
    for null in (None, float("nan")):
        assert table.get(null) == 2
        moved = table.only(np.array([null], dtype=object))
        assert dict(zip(*moved.totals())) == {None: 2}
    assert dict(zip(*table.only(np.array(["a", "b"], dtype=object)).totals())) == {"a": 1}
    assert len(table.only(np.array([], dtype=object))) == 0


def test_ids_of_keys_a_table_dropped_go_with_a_fresh_set_so_ever_new_keys_keep_memory_bounded():
    table = KeyedTable(Sum(), INTERVAL, ttl_ms=100)
    for step in range(60):
        apply(table, [(f"k{step}-{i}", step * 200, 1) for i in range(100)])
        table.expire(step * 200)
    # Each step's keys expire at the next; the ids kept are of the keys the table holds
    # and at most twice as many more, as the set is renewed when it holds that many.
    assert len(table) == 100 and len(table._key_ids) <= 2 * len(table) + 1024
    assert totals(table) == {f"k59-{i}": 1 for i in range(100)}


@pytest.mark.parametrize("held", [["a"], ["a", None], [1], [b"a", None]], ids=["str", "str-null", "int", "bytes-null"])
def test_a_key_that_cannot_be_hashed_is_refused_by_any_table_and_no_two_keys_share_an_id_after(held):
    """A refused update, whatever ids the table's keys have (of strings, or in the hash
    table of objects, where a failed batch's keys were hashed in part)."""
    table = table_of()
    apply(table, [(key, 1, 1) for key in held])
    before = table.encode()
    with pytest.raises(StateValueError, match=r"\(\['unhashable'\]\)"):
        table.update(np.array([held[0], ["unhashable"]], dtype=object), [2, 3], [10, 100])
    assert table.encode() == before
    new = ["c", "b"] if isinstance(held[0], str) else [b"c", b"b"] if isinstance(held[0], bytes) else [3, 2]
    apply(table, [(new[0], 4, 1000)])
    apply(table, [(new[1], 5, 10000)])
    assert totals(table) == {**{key: 1 for key in held}, new[0]: 1000, new[1]: 10000}


def test_a_table_of_some_keys_of_another_keeps_ids_only_for_its_own():
    table = table_of()
    apply(table, [(f"k{i}", 1, 1) for i in range(5000)])
    part = table.only(np.array(["k1", "k2"], dtype=object))
    assert len(part._key_ids) <= 2  # not the 5,000 of the table it came from
    apply(part, [("k3", 2, 1)])
    assert totals(part) == {"k1": 1, "k2": 1, "k3": 1}


# -- keys of one kind ----------------------------------------------------------------


def _held_keys(table: KeyedTable) -> list:
    """The keys of ``table``'s checkpoint decoded, once each in their order, as ``repr``
    (a str key and a bytes key of one text are two keys)."""
    data = table.checkpoint(table.checkpoint_ms + INTERVAL)
    decoded = decode_table(data, table.monoid, table.interval_ms, table.window, ttl_ms=table.ttl_ms)
    return list(dict.fromkeys(map(repr, decoded.keys.tolist())))


_other_kinds = {
    "bytes-to-str": (["a", "b"], b"a", r"bytes keys \(b'a'\) to a table of str keys"),
    "int-to-str": (["a", "b"], 1, r"numeric keys \(1\) to a table of str keys"),
    "str-to-bytes": ([b"a", b"b"], "a", r"str keys \('a'\) to a table of bytes keys"),
    "str-to-int": ([1, 2], "1", r"str keys \('1'\) to a table of numeric keys"),
    "bool-to-int": ([2, 3], True, r"bool keys \(True\) to a table of numeric keys"),
    # Keys of two kinds that Python's equality makes one key: each is refused, not folded into the other.
    "bool-equal-to-an-int": ([1, 2], True, r"bool keys \(True\) to a table of numeric keys"),
    "int-equal-to-a-bool": ([True, False], 0, r"numeric keys \(0\) to a table of bool keys"),
    "decimal-equal-to-an-int": ([1, 2], Decimal(2), r"Decimal keys \(Decimal\('2'\)\) to a table of numeric keys"),
}


@pytest.mark.parametrize("made", sorted(_tables()))
@pytest.mark.parametrize(("held", "other", "message"), _other_kinds.values(), ids=_other_kinds.keys())
def test_an_update_that_brings_keys_of_another_kind_is_refused_naming_both_and_changes_nothing(
        made, held, other, message):
    table = _tables()[made]()
    value = (lambda i: (i,)) if isinstance(table.monoid, Concat) else int
    apply(table, [(key, 10 + i, value(i)) for i, key in enumerate(held)])
    table.checkpoint(INTERVAL)
    apply(table, [(held[0], INTERVAL + 5, value(5))])
    before = table.encode()
    keys = np.array([held[1], other, None], dtype=object)
    with pytest.raises(StateValueError, match=f"^keys of one table must be of one kind: this update brings {message}"):
        table.update(keys, [INTERVAL + 6] * 3, [value(i) for i in range(3)])
    assert table.encode() == before
    # The table goes on with keys of its kind (and the null key), and checkpoints them as they are.
    apply(table, [(None, INTERVAL + 7, value(7)), (held[1], INTERVAL + 8, value(8))])
    assert _held_keys(table) == [repr(key) for key in held] + ["None"]


def test_one_update_that_brings_keys_of_two_kinds_is_refused_whole():
    table = table_of()
    with pytest.raises(StateValueError, match=r"^keys of one table must be of one kind: this update brings str keys "
                                              r"\('a'\) and bytes keys \(b'a'\)"):
        table.update(np.array([None, "a", b"a", "b"], dtype=object), [1, 2, 3, 4], [1, 1, 1, 1])
    assert (len(table), table.late_count) == (0, 0)
    apply(table, [(b"a", 5, 1), (None, 6, 2), (b"b", 7, 4)])
    assert _held_keys(table) == ["b'a'", "None", "b'b'"]


@pytest.mark.parametrize("other", [b"a", 1, True])
def test_an_update_refused_before_its_keys_are_hashed_leaves_str_keys_found_as_strings(other):
    """Keys of a table of str keys are found by their strings' hashes (``StringIds``) until
    a key that is not a string comes; one of a batch that is refused does not count."""
    table = table_of()
    apply(table, [("a", 10, 1), ("b", 11, 2)])
    with pytest.raises(StateValueError, match="^keys of one table must be of one kind"):
        table.update(np.array(["c", other], dtype=object), [12, 13], [1, 1])
    assert table._key_ids.strings_only
    apply(table, [("c", 14, 4), ("a", 15, 8)])
    assert sorted(zip(*table.totals())) == [("a", 9), ("b", 2), ("c", 4)]


@pytest.mark.parametrize("held", [["a", "b"], ["a", None, "b"], [1, 2]], ids=["strings", "with null", "numbers"])
def test_a_lookup_gives_no_ids_to_keys_the_table_does_not_hold(held):
    """``totals(keys)``, ``get`` and ``only`` find the keys held among any keys, of any
    kind, and leave the ids as they were: a table of str keys keeps finding its keys by
    their strings' hashes."""
    table = table_of()
    apply(table, [(key, 10 + i, i + 1) for i, key in enumerate(held)])
    ids, strings_only = len(table._key_ids), table._key_ids.strings_only
    asked = np.array([held[-1], "z", 7, None, 2.5, b"a"], dtype=object)
    found = [(key, i + 1) for i, key in enumerate(held) if key in (held[-1], None)]
    assert [(key, int(value)) for key, value in zip(*table.totals(asked))] == found
    assert table.get("z") == 0 and table.get(held[0]) == 1
    assert [(key, int(value)) for key, value in zip(*table.only(asked).totals())] == found
    assert (len(table._key_ids), table._key_ids.strings_only) == (ids, strings_only)
    with pytest.raises(StateValueError, match=r"^keys must be hashable: this lookup brings a list key"):
        table.totals(np.array([held[0], ["a", "list"]], dtype=object))
    assert len(table._key_ids) == ids


@pytest.mark.parametrize(("held", "other", "message"), [
    (["a"], np.array([3, 4]), r"numeric keys \(3\) to a table of str keys"),
    ([1], np.array(["x", "y"]), r"str keys \('x'\) to a table of numeric keys"),
    ([1], np.array([b"x"]), r"bytes keys \(b'x'\) to a table of numeric keys"),
    ([0, 1], np.array([True, False]), r"bool keys \(True\) to a table of numeric keys"),
], ids=["int64", "unicode", "bytes", "bool"])
def test_keys_of_another_kind_are_refused_from_a_numpy_array_of_any_dtype(held, other, message):
    table = table_of()
    apply(table, [(key, 10, 1) for key in held])
    before = table.encode()
    with pytest.raises(StateValueError, match=message):
        table.update(other, np.full(len(other), 20), np.ones(len(other), dtype=np.int64))
    assert table.encode() == before


@pytest.mark.parametrize(("keys", "held"), [
    (["a", None, "b"], ["'a'", "None", "'b'"]),
    ([None, "a"], ["None", "'a'"]),
    ([b"a", None, b"b"], ["b'a'", "None", "b'b'"]),
    ([1, None, 2**60 + 1], ["1", "None", "1152921504606846977"]),
    ([np.int64(3), 4, np.int32(5)], ["3", "4", "5"]),
    (np.array([3, 1]), ["3", "1"]),
    (np.array(["x", "y"]), ["'x'", "'y'"]),
], ids=["str", "null-first", "bytes", "int", "numpy-ints", "int64", "unicode"])
def test_keys_of_one_kind_beside_the_null_key_are_taken_in_any_batches_and_checkpointed_as_they_are(keys, held):
    for one_by_one in (False, True):
        table = table_of()
        for chunk in ([keys[i:i + 1] for i in range(len(keys))] if one_by_one else [keys]):
            table.update(chunk, np.full(len(chunk), 10), np.ones(len(chunk), dtype=np.int64))
        assert _held_keys(table) == held


def test_a_float_array_of_nan_keys_is_the_null_key_to_a_table_of_any_kind():
    table = table_of()
    apply(table, [("a", 1, 1)])
    table.update(np.array([np.nan, np.nan]), [2, 3], [10, 100])
    assert (table.get("a"), table.get(None), len(table)) == (1, 110, 2)
    assert _held_keys(table) == ["'a'", "None"]


def test_integers_and_floats_are_keys_of_one_kind():
    # Python's equality makes 1 and 1.0 one key, and a checkpoint holds them as floats.
    table = table_of()
    apply(table, [(1, 10, 1), (2.5, 20, 2)])
    apply(table, [(1.0, 30, 4), (np.float32(3), 40, 8), (2**40, 50, 16)])
    assert totals(table) == {1: 5, 2.5: 2, 3: 8, 2**40: 16}
    decoded = decode_table(table.checkpoint(INTERVAL), Sum(), INTERVAL)
    assert totals(decoded) == {1: 5, 2.5: 2, 3: 8, 2**40: 16}


def test_a_table_whose_keys_all_went_takes_keys_of_another_kind():
    table = KeyedTable(Sum(), INTERVAL, ttl_ms=100)
    apply(table, [("a", 10, 1), ("b", 20, 2)])
    table.checkpoint(INTERVAL)
    assert table.expire(500) == 2 and len(table) == 0
    apply(table, [(b"a", 510, 4)])
    assert totals(table) == {b"a": 4}
    with pytest.raises(StateValueError, match=r"brings str keys \('a'\) to a table of bytes keys"):
        apply(table, [("a", 520, 8)])


def test_keys_of_another_kind_are_looked_up_as_unknown_keys_not_refused():
    table = table_of()
    apply(table, [("a", 10, 1), ("1", 20, 2)])
    assert (table.get(b"a"), table.get(1), table.get("a")) == (0, 0, 1)
    assert totals(table, np.array([b"a", 1, "1", None], dtype=object)) == {"1": 2}
    assert len(table.only(np.array([b"a", 1], dtype=object))) == 0
    apply(table, [("b", 30, 4)])
    assert _held_keys(table) == ["'a'", "'1'", "'b'"]


@pytest.mark.parametrize(("held", "asked"), [
    ([1, 0, 2], [True, False, np.True_, Decimal(2)]),
    ([True, False], [1, 0, np.int64(1), 1.0]),
], ids=["numbers", "bools"])
def test_keys_of_another_kind_equal_to_keys_held_are_looked_up_as_unknown_keys(held, asked):
    """Python's equality makes ``True`` the key ``1``: a lookup does not find one for the
    other, as an update never folds one into the other."""
    table = table_of()
    apply(table, [(key, 10 + i, 2**i) for i, key in enumerate(held)])
    assert [table.get(key) for key in asked] == [0] * len(asked)
    assert totals(table, np.array([*asked, held[0]], dtype=object)) == {held[0]: 1}
    assert len(table.only(np.array(asked, dtype=object))) == 0


def test_a_table_of_keys_of_another_kind_is_not_absorbed_and_nothing_changes():
    table, other, nulls = table_of(), table_of(), table_of()
    apply(table, [("a", 10, 1)])
    apply(other, [(None, 20, 2), (b"a", 30, 4)])
    apply(nulls, [(None, 40, 8)])
    before = table.encode()
    with pytest.raises(StateValueError, match=r"^keys of one table must be of one kind: the table absorbed brings "
                                              r"bytes keys \(b'a'\) to a table of str keys"):
        table.absorb(other)
    assert table.encode() == before
    table.absorb(nulls)
    assert _held_keys(table) == ["'a'", "None"]


@pytest.mark.parametrize("keys", [["a", "b"], [b"a"], [2**60 + 1, 7], [2.5]], ids=["str", "bytes", "int", "float"])
def test_a_nan_key_is_checkpointed_as_the_null_key_beside_keys_of_any_kind(keys):
    table = table_of()
    apply(table, [(float("nan"), 5, 1)] + [(key, 10 + i, 2) for i, key in enumerate(keys)])
    decoded = decode_table(table.checkpoint(INTERVAL), Sum(), INTERVAL)
    assert pd.isna(decoded.keys[0]) and [(type(key), key) for key in decoded.keys[1:]] == [
        (type(key), key) for key in keys]
    assert decoded.get(float("nan")) == decoded.get(None) == 1
