"""Session windows: ``SessionWindow`` and the ``SessionTable`` that holds the sessions of
many keys, against a model that computes sessions from the whole input at once; through
batches in any order, checkpoints, recovery with replay, encoding and merging."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiles import examples
from test_table import Concat

from monoids.numeric import Sum
from state import SessionWindow, WindowState
from state.errors import StateValueError
from state.sessions import SessionTable
from state.table import KeyedTable
from state.table_format import describe
from state.tables import decode_table, read_table, table_for
from state.window import window_from

INTERVAL, GAP = 100, 30


def session_table(monoid=None, gap=GAP, interval=INTERVAL) -> SessionTable:
    return table_for(monoid or Sum(), interval, SessionWindow(gap))


def send(table: KeyedTable, messages) -> None:
    if messages:
        keys, stamps, values = zip(*messages)
        table.update(np.array(keys, dtype=object), np.array(stamps, dtype=np.int64), table.monoid.column(values))


def as_set(results) -> set:
    return set(zip(results.keys.tolist(), results.starts_ms.tolist(), results.ends_ms.tolist(),
                   map(_plain, results.values.tolist())))


def _plain(value):
    return tuple(value) if isinstance(value, (list, tuple)) else value


def model(messages, gap=GAP, monoid=None) -> set:
    """Sessions computed from all messages at once: per key, by time, a new session
    wherever a message follows the one before by ``gap`` or more; ``[first, last + gap)``."""
    monoid = monoid or Sum()
    sessions = []
    for key in sorted({m[0] for m in messages}):
        times = sorted((t, i) for i, (k, t, _) in enumerate(messages) if k == key)
        current = None
        for t, i in times:
            if current is None or t - current[2] >= gap:
                current = [key, t, t, monoid.zero()]
                sessions.append(current)
            current[2] = t
            current[3] = monoid.plus(current[3], messages[i][2])
    return {(k, start, last + gap, _plain(value)) for k, start, last, value in sessions}


# -- the window ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, 1.5, "30", True, None])
def test_a_gap_that_is_not_a_positive_int_is_refused_naming_it(bad):
    with pytest.raises(StateValueError, match="SessionWindow gap_ms"):
        SessionWindow(bad)


def test_a_session_window_describes_itself_and_is_read_back():
    assert SessionWindow(500).describe() == {"gap_ms": 500}
    assert window_from({"gap_ms": 500}) == SessionWindow(500)
    assert describe(Sum(), 100, SessionWindow(500))["window"] == {"gap_ms": 500}


def test_a_window_state_of_sessions_builds_session_tables():
    table = WindowState(Sum(), SessionWindow(250)).build(250)
    assert isinstance(table, SessionTable)
    assert table.interval_ms == 250


# -- sessions --------------------------------------------------------------------------


def test_messages_less_than_the_gap_apart_make_one_session_and_a_gap_ends_it():
    table = session_table()
    send(table, [("a", 10, 1), ("a", 39, 1), ("a", 69, 1), ("a", 98, 1), ("b", 10, 1)])
    # 39 - 10 < 30 and 69 - 39 = 30: the third message starts a new session
    assert as_set(table.open_windows()) == {("a", 10, 69, 2), ("a", 69, 128, 2), ("b", 10, 40, 1)}


def test_a_message_in_the_gap_of_two_sessions_joins_them():
    table = session_table()
    send(table, [("a", 10, 1), ("a", 60, 1)])
    assert len(table.open_windows()) == 2
    send(table, [("a", 35, 5)])
    assert as_set(table.open_windows()) == {("a", 10, 90, 7)}


def test_a_session_across_a_checkpoint_boundary_is_one_session_of_two_segments():
    table = session_table()
    send(table, [("a", 90, 1), ("a", 110, 1)])
    assert len(table) == 2  # a segment never crosses a boundary
    assert as_set(table.open_windows()) == {("a", 90, 140, 2)}


def test_messages_of_one_session_and_one_interval_are_one_segment_and_update_returns_their_keys():
    table = session_table()
    send(table, [("a", 10, 1), ("b", 20, 1)])
    touched = table.update(np.array(["a", "a", "c"], dtype=object), np.array([15, 25, 30]), [1, 1, 1])
    assert touched.tolist() == ["a", "c"]  # the keys of the update, not b
    assert len(table) == 3  # a's three messages are one segment
    sessions = table.open_windows()
    assert as_set(sessions) == {("a", 10, 55, 3), ("b", 20, 50, 1), ("c", 30, 60, 1)}
    assert sessions.starts_ms.dtype == sessions.ends_ms.dtype == np.int64  # a sink's bigint columns


def test_a_session_closed_at_the_watermark_is_not_open_and_goes_at_the_next_checkpoint():
    table = session_table()
    send(table, [("a", 10, 1), ("b", 30, 1)])
    assert as_set(table.close_windows(40)) == {("a", 10, 40, 1)}
    assert as_set(table.open_windows()) == {("b", 30, 60, 1)}
    table.checkpoint(100)
    assert table.keys.tolist() == ["b"]


def test_a_watermark_that_is_no_time_is_refused_naming_it():
    with pytest.raises(StateValueError, match="watermark_ms must be"):
        session_table().close_windows(-1)


def test_sessions_close_by_themselves_and_take_no_ttl():
    with pytest.raises(StateValueError, match="only a table without a window expires keys"):
        SessionTable(Sum(), INTERVAL, SessionWindow(GAP), ttl_ms=50)


def test_a_session_closes_when_the_watermark_reaches_its_end_and_is_emitted_once():
    table = session_table()
    send(table, [("a", 10, 1), ("b", 20, 1)])
    assert as_set(table.close_windows(39)) == set()
    assert as_set(table.close_windows(40)) == {("a", 10, 40, 1)}
    assert as_set(table.close_windows(60)) == {("b", 20, 50, 1)}
    assert as_set(table.close_windows(100)) == set()


def test_segments_of_a_non_commutative_monoid_fold_in_the_order_of_their_starts():
    table = session_table(Concat())
    send(table, [("k", 120, ("c",)), ("k", 95, ("b",))])
    send(table, [("k", 80, ("a",)), ("k", 140, ("d",))])
    assert as_set(table.open_windows()) == {("k", 80, 170, ("a", "b", "c", "d"))}


def test_a_checkpoint_prunes_sessions_already_emitted_and_holds_the_others():
    table = session_table()
    send(table, [("a", 10, 1), ("b", 80, 1), ("b", 105, 1)])
    table.close_windows(100)  # a's session [10, 40) closes; b's runs on
    data = table.checkpoint(100)
    assert set(table.keys.tolist()) == {"b"}
    restored = read_table(data)
    assert isinstance(restored, SessionTable) and restored.gap_ms == GAP
    # the checkpoint holds the messages before 100 only: b's first segment
    assert as_set(restored.open_windows()) == {("b", 80, 110, 1)}


# -- against the model ------------------------------------------------------------------

# Times on a 10 ms grid, so that messages exactly a gap apart are common.
messages_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 99).map(lambda t: 10 * t), st.integers(-5, 5)),
    max_size=60,
)


def stream(table: SessionTable, messages, cuts, start_ms=0) -> tuple[set, dict]:
    """Feeds ``messages`` by time in batches cut at ``cuts`` (each batch shuffled);
    after each, the watermark moves to the oldest message still to come, closing
    sessions and taking the checkpoint due. Returns the sessions emitted and the
    checkpoints taken, by time."""
    ordered = sorted(messages, key=lambda m: m[1])
    emitted, taken = set(), {}
    bounds = [0, *sorted(cuts), len(ordered)]
    for first, end in zip(bounds, bounds[1:]):
        batch = ordered[first:end]
        send(table, batch[::-1] if first % 2 else batch)
        watermark = ordered[end][1] if end < len(ordered) else 2_000
        emitted |= as_set(table.close_windows(max(watermark, start_ms)))
        due = table.due_checkpoint(watermark)
        if due is not None:
            taken[due] = table.checkpoint(due)
    return emitted, taken


@settings(max_examples=examples(150))
@given(messages_strategy, st.lists(st.integers(0, 60), max_size=8), st.sampled_from([10, 30, 250]))
def test_sessions_emitted_over_a_stream_equal_the_model(messages, cuts, gap):
    table = session_table(gap=gap)
    cuts = [c for c in cuts if c <= len(messages)]
    emitted, _ = stream(table, messages, cuts)
    assert emitted == model(messages, gap)
    assert table.late_count == 0
    assert len(table.open_windows()) == 0


@settings(max_examples=examples(100))
@given(messages_strategy, st.lists(st.integers(0, 60), max_size=8), st.sampled_from([10, 30, 250]))
def test_a_restore_from_any_checkpoint_then_the_messages_from_it_on_emits_what_the_first_run_did(
    messages, cuts, gap
):
    cuts = [c for c in cuts if c <= len(messages)]
    emitted, taken = stream(session_table(gap=gap), messages, cuts)
    for t, data in taken.items():
        restored = session_table(gap=gap)
        restored.recover(t, data)
        later = [m for m in messages if m[1] >= t]
        again, _ = stream(restored, later, [c for c in cuts if c <= len(later)], start_ms=t)
        # sessions that closed by T were emitted before the checkpoint; the others again
        assert again == {s for s in emitted if s[2] > t}, t
        assert restored.late_count == 0


def test_encode_and_decode_keep_segments_times_and_counters():
    table = session_table()
    send(table, [("a", 10, 1), ("a", 95, 2), ("a", 105, 3), ("b", 7, 4)])
    table.close_windows(50)
    decoded = decode_table(table.encode(), Sum(), INTERVAL, SessionWindow(GAP))
    assert isinstance(decoded, SessionTable)
    assert as_set(decoded.open_windows()) == as_set(table.open_windows())
    assert decoded.times.tolist() == table.times.tolist()
    assert decoded.emitted_ms == 50


def test_keys_moved_into_another_table_keep_their_sessions():
    table = session_table()
    send(table, [("a", 10, 1), ("a", 30, 1), ("b", 10, 1)])
    moved = session_table()
    moved.absorb(table.only(np.array(["a"], dtype=object)))
    assert as_set(moved.open_windows()) == {("a", 10, 60, 2)}
