"""State declarations (``NonWindowState``, ``WindowState``): frozen, checked specs, and
the live state the runtime builds from a spec plus a snapshot (``build``), driven here for
one key as a key group drives it: messages, then on a watermark advance the windows it
closes and a checkpoint at the newest boundary it passed (after Gearpump's
NonWindowStateSpec and WindowStateSpec)."""

from __future__ import annotations

import math
import pickle
from dataclasses import FrozenInstanceError

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiles import examples

from monoids.base import MonoidTypeError, MonoidValueError
from monoids.numeric import Count, Max, Sum
from state.boundaries import boundary_at_or_before
from state.errors import CorruptCheckpointError, StateValueError
from state.persistent_state import NonWindowState, PersistentState, WindowState
from state.sessions import SessionTable
from state.table import KeyedTable
from state.tables import decode_table
from state.window import SessionWindow, Window

KEY = np.array(["k"], dtype=object)


class OneKey:
    """The live state of ``spec`` for one key, checkpointed every ``interval`` ms."""

    def __init__(self, spec: PersistentState, interval: int = 100, table: KeyedTable | None = None):
        self.spec, self.interval = spec, interval
        self.table = spec.build(interval) if table is None else table

    def update(self, ts: int, value) -> bool:
        """Applies one message; ``False`` if the table refused it as late."""
        late = self.table.late_count
        self.table.update(KEY, np.array([ts], dtype=np.int64), self.spec.monoid.column([value]))
        return self.table.late_count == late

    def close(self, watermark: int) -> list[tuple[int, int, object]]:
        """``(start, end, value)`` of the windows the watermark closes."""
        closed = self.table.close_windows(watermark)
        return list(zip(closed.starts_ms.tolist(), closed.ends_ms.tolist(), self.spec.monoid.values(closed.values)))

    def open_windows(self) -> dict:
        windows = self.table.open_windows()
        return dict(zip(windows.starts_ms.tolist(), self.spec.monoid.values(windows.values)))


# == the specs ========================================================================


@pytest.mark.parametrize("make", [lambda m: NonWindowState(m), lambda m: WindowState(m, Window(100))])
def test_a_persistent_state_needs_a_monoid(make):
    with pytest.raises(StateValueError, match="needs a Monoid"):
        make(sum)


def test_a_window_state_needs_a_window():
    with pytest.raises(StateValueError, match="Window"):
        WindowState(Sum(), 100)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "spec", [NonWindowState(Sum()), NonWindowState(Count(), ttl_ms=500), WindowState(Sum(), Window(300, 100)),
             WindowState(Max(), SessionWindow(30))]
)
def test_a_spec_is_a_frozen_picklable_value(spec):
    assert pickle.loads(pickle.dumps(spec)) == spec
    with pytest.raises(FrozenInstanceError):
        spec.monoid = Count()  # type: ignore[misc]


def test_specs_name_their_window_and_ttl():
    assert (NonWindowState(Sum()).window, NonWindowState(Sum(), ttl_ms=5).ttl_ms) == (None, 5)
    assert (WindowState(Sum(), Window(100)).window, WindowState(Sum(), Window(100)).ttl_ms) == (Window(100), None)


@pytest.mark.parametrize(
    ("spec", "kind"),
    [(NonWindowState(Sum()), KeyedTable), (WindowState(Sum(), Window(100)), KeyedTable),
     (WindowState(Sum(), SessionWindow(250)), SessionTable)],
)
def test_a_spec_builds_an_empty_table_of_its_kind_and_interval(spec, kind):
    table = spec.build(250)
    assert type(table) is kind
    assert (len(table), table.interval_ms, table.window, table.checkpoint_ms) == (0, 250, spec.window, 0)


def test_a_table_built_from_a_restore_point_holds_nothing_before_it():
    state = OneKey(NonWindowState(Sum()), table=NonWindowState(Sum()).build(100, checkpoint_ms=300))
    assert (state.update(299, 1), state.update(300, 2)) == (False, True)
    assert state.table.get("k") == 2


def test_a_table_built_from_its_encoding_is_the_same_table():
    spec = WindowState(Sum(), Window(300, 100))
    state = OneKey(spec)
    for ts in (50, 150, 420):
        state.update(ts, ts)
    state.close(300)
    built = OneKey(spec, table=spec.build(100, state.table.encode()))
    assert (built.open_windows(), built.close(1000)) == (state.open_windows(), state.close(1000))


def test_a_table_built_from_a_checkpoint_holds_the_messages_before_it():
    spec = NonWindowState(Sum())
    state = OneKey(spec)
    for ts in (10, 150, 199, 200, 250):
        state.update(ts, ts)
    data = state.table.checkpoint(200)
    built = spec.build(100, data, 200)
    assert (built.get("k"), built.checkpoint_ms) == (10 + 150 + 199, 200)


def test_a_table_is_not_built_from_bytes_of_another_window_time_or_monoid():
    state = OneKey(WindowState(Sum(), Window(300, 100)))
    state.update(10, 1)
    state.close(200)
    data = state.table.checkpoint(200)
    with pytest.raises(CorruptCheckpointError, match="buckets"):
        WindowState(Sum(), Window(300, 150)).build(100, data, 200)
    with pytest.raises(CorruptCheckpointError, match="200"):
        WindowState(Sum(), Window(300, 100)).build(100, data, 300)
    with pytest.raises(CorruptCheckpointError):
        WindowState(Max(), Window(300, 100)).build(100, data, 200)


# == windows of one key ===============================================================


def test_tumbling_windows_close_when_the_watermark_reaches_their_end():
    state = OneKey(WindowState(Sum(), Window(100)))
    for ts, v in [(10, 1), (99, 2), (100, 4), (250, 8)]:
        state.update(ts, v)
    assert state.close(99) == []
    assert state.close(100) == [(0, 100, 3)]
    assert state.close(300) == [(100, 200, 4), (200, 300, 8)]


def test_sliding_windows_hold_every_message_of_their_range():
    state = OneKey(WindowState(Sum(), Window(300, 100)))
    for ts, v in [(50, 1), (150, 10), (250, 100), (350, 1000)]:
        state.update(ts, v)
    assert state.close(700) == [(0, 300, 111), (100, 400, 1110), (200, 500, 1100), (300, 600, 1000)]


def test_windows_without_messages_are_not_emitted():
    state = OneKey(WindowState(Count(), Window(100)))
    state.update(450, 1)
    assert state.close(1000) == [(400, 500, 1)]


def test_open_windows_map_each_start_to_its_value_so_far():
    state = OneKey(WindowState(Max(), Window(300, 100)))
    for ts, v in [(50, 1), (150, 7), (250, 3)]:
        state.update(ts, v)
    assert state.open_windows() == {0: 7, 100: 7, 200: 3}
    state.close(300)
    assert state.open_windows() == {100: 7, 200: 3}


def test_a_closed_window_is_emitted_exactly_once():
    state = OneKey(WindowState(Sum(), Window(100)))
    state.update(10, 1)
    assert state.close(150) == [(0, 100, 1)]
    assert state.close(150) == state.close(120) == state.close(180) == []


def test_a_message_for_a_closed_window_is_late_counted_and_not_applied():
    state = OneKey(WindowState(Sum(), Window(300, 100)))
    state.update(50, 1)
    state.close(310)
    assert (state.update(309, 5), state.update(0, 5)) == (False, False)
    assert state.table.late_count == 2
    assert state.update(310, 5) is True
    assert state.close(1000) == [(100, 400, 5), (200, 500, 5), (300, 600, 5)]


def test_a_message_before_the_last_checkpoint_is_late():
    state = OneKey(WindowState(Sum(), Window(300, 100)))
    state.update(150, 1)
    state.table.checkpoint(200)
    assert state.update(199, 1) is False
    assert state.table.late_count == 1


def test_bad_input_to_a_window_table_raises_and_changes_nothing():
    state = OneKey(WindowState(Sum(float), Window(100)))
    state.update(10, 1.0)
    with pytest.raises(StateValueError):
        state.update(-5, 1.0)
    with pytest.raises(MonoidValueError):
        state.update(20, math.nan)
    with pytest.raises(MonoidTypeError):
        state.update(20, "x")
    assert state.open_windows() == {0: 1.0}
    assert state.table.late_count == 0


def test_a_window_checkpoint_must_be_a_multiple_of_the_interval():
    state = OneKey(WindowState(Sum(), Window(300, 100)), interval=1000)
    with pytest.raises(StateValueError, match="multiple of 1000"):
        state.table.checkpoint(1500)


def test_checkpoint_before_closing_windows_does_not_lose_the_windows_it_closes():
    """A key group may checkpoint at ``T`` (the watermark has passed ``T``) before it
    closes windows; the windows ending at or before ``T`` have not been emitted yet and
    must still be, with their values (or the checkpoint must refuse loudly)."""
    state = OneKey(WindowState(Sum(), Window(100)))
    state.update(50, 1)
    state.update(150, 2)
    try:
        state.table.checkpoint(100)
    except StateValueError:
        return  # refusing is acceptable; silently dropping the window is not
    assert state.close(200) == [(0, 100, 1), (100, 200, 2)]


# -- window tables against brute force ---------------------------------------------

WINDOWS = [Window(100), Window(300, 100), Window(250, 100), Window(200, 50)]
INTERVALS = [100, 200, 1000]

events = st.lists(
    st.one_of(
        # a message at watermark + offset: mostly on time, sometimes late
        st.tuples(st.just("msg"), st.integers(-60, 500), st.integers(-50, 50)),
        st.tuples(st.just("wm"), st.integers(0, 250), st.just(0)),
    ),
    max_size=80,
)


class Run:
    """Drives the table of a window state for one key like a key group: messages, then
    on a watermark advance the windows it closes followed by a checkpoint at the newest
    boundary the watermark passed. Records every emitted window and every checkpoint."""

    def __init__(self, state: OneKey):
        self.state, self.interval = state, state.interval
        self.emitted: list[tuple[int, int, object]] = []
        self.checkpoints: list[tuple[int, int, bytes]] = []  # (event index, time, data)
        self.last_checkpoint = 0

    def play(self, stream, start_index=0):
        for index, (kind, ts, value) in enumerate(stream, start_index):
            if kind == "msg":
                self.state.update(ts, value)
            else:
                self.emitted += self.state.close(ts)
                boundary = boundary_at_or_before(ts, self.interval)
                if boundary > self.last_checkpoint:
                    self.checkpoints.append((index, boundary, self.state.table.checkpoint(boundary)))
                    self.last_checkpoint = boundary


def absolute(events_):
    """Events with absolute times: watermark advances accumulate, messages are placed
    relative to the current watermark (never before 0)."""
    out, watermark = [], 0
    for kind, amount, value in events_:
        if kind == "wm":
            watermark += amount
            out.append(("wm", watermark, 0))
        else:
            out.append(("msg", max(0, watermark + amount), value))
    return out


def brute_force(stream, window: Window, interval: int):
    """Window sums over the on-time messages, computed from the definition."""
    sealed, last_checkpoint, accepted, late = 0, 0, [], 0
    for kind, ts, value in stream:
        if kind == "msg":
            if ts < sealed:
                late += 1
            else:
                accepted.append((ts, value))
        else:
            boundary = boundary_at_or_before(ts, interval)
            last_checkpoint = max(last_checkpoint, boundary)
            sealed = max(sealed, ts, last_checkpoint)
    final = max([0] + [ts for kind, ts, _ in stream if kind == "wm"])
    windows = {}
    for start in window.starts_closing(0, final):
        inside = [v for ts, v in accepted if start <= ts < start + window.size_ms]
        if inside:
            windows[start] = sum(inside)
    return windows, late


@settings(max_examples=examples(80), suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(WINDOWS), st.sampled_from(INTERVALS), events)
def test_window_results_equal_a_brute_force_computation(window, interval, events_):
    stream = absolute(events_)
    run = Run(OneKey(WindowState(Sum(), window), interval))
    run.play(stream)
    expected, late = brute_force(stream, window, interval)
    starts = [start for start, _, _ in run.emitted]
    assert len(starts) == len(set(starts)), "a window was emitted twice"
    assert starts == sorted(starts)
    assert all(end == start + window.size_ms for start, end, _ in run.emitted)
    assert {start: value for start, _, value in run.emitted} == expected
    assert run.state.table.late_count == late


def rows(data: bytes, window: Window, interval: int) -> list:
    """The (bucket, value) rows of checkpoint bytes (the counters left aside)."""
    table = decode_table(data, Sum(), interval, window)
    return sorted(zip(table.buckets.tolist(), table.values.tolist()))


@settings(max_examples=examples(80), suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(WINDOWS), st.sampled_from(INTERVALS), events, st.data())
def test_recover_and_replay_from_a_checkpoint_gives_the_same_later_windows(window, interval, events_, data):
    """The exactly-once property: recovering the checkpoint at ``T`` and replaying the
    messages with ``ts >= T`` (and the watermarks) emits, for every window ending after
    ``T``, the value the uninterrupted run emitted, and nothing else."""
    stream = absolute(events_)
    spec = WindowState(Sum(), window)
    original = Run(OneKey(spec, interval))
    original.play(stream)
    if not original.checkpoints:
        return
    _, t, checkpoint = data.draw(st.sampled_from(original.checkpoints))

    recovered = Run(OneKey(spec, interval, spec.build(interval, checkpoint, t)))
    recovered.last_checkpoint = t
    recovered.play([e for e in stream if e[0] == "wm" or e[1] >= t])

    later = {start: value for start, end, value in original.emitted if end > t}
    assert {start: value for start, _, value in recovered.emitted} == later
    # and the replay takes the same later checkpoints, holding the same panes
    assert [(ts, rows(d, window, interval)) for _, ts, d in recovered.checkpoints] == [
        (ts, rows(d, window, interval)) for _, ts, d in original.checkpoints if ts > t
    ]


def test_panes_are_pruned_at_checkpoints_so_the_state_stays_bounded():
    window, interval = Window(300, 100), 100
    state = OneKey(WindowState(Sum(), window), interval)
    run = Run(state)
    sizes, total = [], 0
    rng = np.random.default_rng(7)
    for watermark in range(0, 100_000, 50):
        for ts in rng.integers(watermark, watermark + 400, size=5).tolist():
            state.update(ts, 1)
            total += 1
        run.play([("wm", watermark, 0)])
        sizes.append(len(state.table))
    # panes kept: the open windows (300 ms) plus messages up to 400 ms ahead, 100 ms each
    assert max(sizes) <= (window.size_ms + 400) // state.table.bucket_ms + 2
    assert len(run.emitted) == len(window.starts_closing(0, 99_950))
    assert sum(value for _, _, value in run.emitted) <= total * 3
    assert len(run.checkpoints) == 999


# == time to live ====================================================================


def test_a_non_window_state_with_ttl_builds_tables_that_expire_keys():
    spec = NonWindowState(Sum(), ttl_ms=1000)
    table = spec.build(100)
    assert (spec.ttl_ms, table.ttl_ms, NonWindowState(Sum()).build(100).ttl_ms) == (1000, 1000, None)


@pytest.mark.parametrize("ttl", [0, -1, 2.5, False])
def test_a_ttl_that_is_not_a_positive_int_is_refused_naming_the_state_and_value(ttl):
    with pytest.raises(StateValueError, match=rf"NonWindowState\(.*\): ttl_ms must be .* got {ttl!r}"):
        NonWindowState(Sum(), ttl_ms=ttl)


def test_a_window_state_takes_no_ttl():
    with pytest.raises(TypeError, match="ttl_ms"):
        WindowState(Sum(), Window(100), ttl_ms=1000)
