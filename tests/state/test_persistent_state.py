"""``NonWindowState`` and ``WindowState`` (after Gearpump's NonWindowStateSpec and
WindowStateSpec): the split at the checkpoint time, late messages, bad input, recovery,
window results against a brute-force computation, and exactly-once replay."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monoids.base import MonoidError, MonoidTypeError, MonoidValueError
from monoids.numeric import Count, Max, Min, Sum
from state.boundaries import boundary_at_or_before
from state.checkpoint_manager import CheckpointManager
from state.checkpoint_store import CheckpointStore
from state.errors import CorruptCheckpointError, StateValueError
from state.fs import LocalFileSystem
from state.persistent_state import NonWindowState, PersistentState, WindowResult, WindowState
from state.table import KeyedTable
from state.window import Window

# == NonWindowState ===================================================================


def snapshot(state: NonWindowState) -> tuple:
    return (state.left, state.right, state.get(), state.late_count, state.checkpoint_time)


def test_a_persistent_state_needs_a_monoid():
    with pytest.raises(StateValueError, match="Monoid"):
        NonWindowState(sum)  # type: ignore[arg-type]


def test_a_new_state_is_zero():
    state = NonWindowState(Sum())
    assert (state.left, state.right, state.get(), state.late_count) == (0, 0, 0, 0)
    assert isinstance(state, PersistentState)


def test_before_any_checkpoint_time_every_message_goes_left():
    state = NonWindowState(Sum())
    for ts in (5, 500, 50_000):
        assert state.update(ts, 1) is True
    assert (state.left, state.right) == (3, 0)


def test_messages_before_the_checkpoint_time_go_left_and_the_others_right():
    state = NonWindowState(Sum())
    state.set_next_checkpoint_time(100)
    state.update(0, 1)
    state.update(99, 10)
    state.update(100, 100)
    state.update(250, 1000)
    assert (state.left, state.right) == (11, 1100)


def test_get_is_left_plus_right():
    state = NonWindowState(Sum())
    state.set_next_checkpoint_time(100)
    state.update(50, 2)
    state.update(150, 3)
    assert state.get() == 5


def test_checkpoint_holds_only_messages_before_the_checkpoint_time():
    monoid = Sum()
    state = NonWindowState(monoid)
    state.set_next_checkpoint_time(100)
    state.update(50, 2)
    state.update(150, 3)
    state.update(60, 4)
    data = state.checkpoint()
    assert monoid.decode(data) == 6


def test_checkpoint_folds_right_into_left():
    state = NonWindowState(Sum())
    state.set_next_checkpoint_time(100)
    state.update(50, 2)
    state.update(150, 3)
    state.checkpoint()
    assert (state.left, state.right, state.get()) == (5, 0, 5)


def test_successive_checkpoints_on_gearpumps_schedule_hold_the_messages_before_each_time():
    monoid = Sum()
    state = NonWindowState(monoid)
    state.set_next_checkpoint_time(100)
    for ts, v in [(10, 1), (110, 2), (210, 4)]:
        state.update(ts, v)
    assert monoid.decode(state.checkpoint()) == 1
    # Gearpump arms the next checkpoint above the newest message: 300
    state.set_next_checkpoint_time(300)
    state.update(250, 8)
    state.update(300, 16)
    assert monoid.decode(state.checkpoint()) == 15
    state.set_next_checkpoint_time(400)
    assert monoid.decode(state.checkpoint()) == 31


def test_a_checkpoint_time_below_a_message_already_folded_left_is_refused():
    """After a checkpoint at 100, ``right`` (here the message at 210) is folded into
    ``left``; a later checkpoint at 200 can then no longer hold "exactly the messages
    before 200". It must not return bytes holding the message at 210 (a replay from 200
    would apply it twice): either refuse, or hold exactly the messages before 200."""
    monoid = Sum()
    state = NonWindowState(monoid)
    state.set_next_checkpoint_time(100)
    for ts, v in [(10, 1), (110, 2), (210, 4)]:
        state.update(ts, v)
    state.checkpoint()
    try:
        state.set_next_checkpoint_time(200)
        data = state.checkpoint()
    except StateValueError:
        return
    assert monoid.decode(data) == 3


def test_checkpoint_before_set_next_checkpoint_time_raises():
    state = NonWindowState(Sum())
    state.update(10, 1)
    with pytest.raises(StateValueError, match="set_next_checkpoint_time"):
        state.checkpoint()
    assert state.get() == 1


def test_a_late_message_after_a_checkpoint_is_counted_and_not_applied():
    state = NonWindowState(Sum())
    state.set_next_checkpoint_time(100)
    state.update(50, 1)
    state.checkpoint()
    state.set_next_checkpoint_time(200)
    assert state.update(99, 1000) is False
    assert state.update(0, 1000) is False
    assert state.late_count == 2
    assert state.get() == 1
    assert state.update(100, 5) is True  # at the checkpoint time: on time
    assert state.get() == 6


@pytest.mark.parametrize("bad_ts", [-1, -1000, 1.5, "10", None, True])
def test_a_bad_timestamp_raises_a_state_value_error_and_changes_nothing(bad_ts):
    state = NonWindowState(Sum())
    state.set_next_checkpoint_time(100)
    state.update(50, 1)
    before = snapshot(state)
    with pytest.raises(StateValueError, match="timestamp"):
        state.update(bad_ts, 1)
    assert snapshot(state) == before


@pytest.mark.parametrize(
    ("monoid", "bad_value", "error"),
    [
        (Sum(), "3", MonoidTypeError),
        (Sum(), 1.5, MonoidTypeError),
        (Sum(), None, MonoidTypeError),
        (Sum(), True, MonoidTypeError),
        (Sum(), 2**64, MonoidValueError),
        (Sum(float), math.nan, MonoidValueError),
        (Sum(float), float("nan"), MonoidValueError),
        (Sum(float), "1.0", MonoidTypeError),
        (Max(), 2.5, MonoidTypeError),
        (Min(float), math.nan, MonoidValueError),
    ],
)
def test_a_value_the_monoid_refuses_raises_and_changes_nothing(monoid, bad_value, error):
    state = NonWindowState(monoid)
    state.set_next_checkpoint_time(100)
    state.update(50, 1)
    state.update(150, 2)
    before = snapshot(state)
    with pytest.raises(error) as raised:
        state.update(60, bad_value)
    assert isinstance(raised.value, MonoidError)
    assert "timestamp 60" in str(raised.value)  # the message says where the value came from
    assert snapshot(state) == before


def test_an_int_sum_that_leaves_64_bits_raises_and_changes_nothing():
    state = NonWindowState(Sum())
    state.update(1, 2**63 - 1)
    before = snapshot(state)
    with pytest.raises(MonoidValueError):
        state.update(2, 1)
    assert snapshot(state) == before


def test_recover_round_trips_the_checkpoint():
    monoid = Sum(float)
    state = NonWindowState(monoid)
    state.set_next_checkpoint_time(100)
    state.update(10, 1.25)
    state.update(120, 100.0)
    data = state.checkpoint()

    recovered = NonWindowState(monoid)
    recovered.recover(100, data)
    assert (recovered.left, recovered.right, recovered.get()) == (1.25, 0.0, 1.25)
    assert recovered.checkpoint_time is None


def test_after_recover_messages_before_the_checkpoint_are_late():
    state = NonWindowState(Sum())
    state.recover(100, Sum().encode(7))
    assert state.update(99, 1) is False
    assert state.late_count == 1
    assert state.update(100, 1) is True
    assert state.get() == 8


def test_recover_and_replay_from_the_checkpoint_equals_the_uninterrupted_state():
    messages = [(5, 1), (150, 2), (60, 4), (230, 8), (110, 16), (90, 32), (320, 64), (205, 128)]
    monoid = Count()

    def run(state, stream, checkpoint_at=None):
        for i, (ts, v) in enumerate(stream):
            if i == checkpoint_at:
                state.set_next_checkpoint_time(200)
                data = state.checkpoint()
            state.update(ts, v)
        return data if checkpoint_at is not None else None

    original = NonWindowState(monoid)
    original.set_next_checkpoint_time(200)
    data = run(original, messages, checkpoint_at=6)  # after (90, 32): late messages none yet

    replayed = NonWindowState(monoid)
    replayed.recover(200, data)
    run(replayed, [(ts, v) for ts, v in messages if ts >= 200])
    assert replayed.get() == original.get()


def test_recover_with_bytes_of_another_monoid_raises_corrupt_checkpoint_error():
    state = NonWindowState(Sum())
    with pytest.raises(CorruptCheckpointError, match="checkpoint at 100"):
        state.recover(100, Max().encode(3))
    with pytest.raises(CorruptCheckpointError):
        state.recover(100, Count().encode(3))
    with pytest.raises(CorruptCheckpointError):
        state.recover(100, Sum(float).encode(3.0))


@pytest.mark.parametrize("data", [b"", b"garbage", Sum().encode(5)[:-1], Sum().encode(5) + b"\x00"])
def test_recover_with_torn_bytes_raises_corrupt_checkpoint_error_and_keeps_the_state(data):
    state = NonWindowState(Sum())
    state.update(10, 3)
    before = snapshot(state)
    with pytest.raises(CorruptCheckpointError):
        state.recover(100, data)
    assert snapshot(state) == before


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(-1000, 1000)), max_size=40),
    st.integers(1, 10).map(lambda k: k * 100),
    st.data(),
)
def test_a_checkpoint_holds_exactly_the_on_time_messages_before_its_time(messages, t, data):
    monoid = Sum()
    state = NonWindowState(monoid)
    state.set_next_checkpoint_time(t)
    cut = data.draw(st.integers(0, len(messages)))
    for ts, v in messages[:cut]:
        state.update(ts, v)
    checkpoint = monoid.decode(state.checkpoint())
    for ts, v in messages[cut:]:
        state.update(ts, v)
    assert checkpoint == sum(v for ts, v in messages[:cut] if ts < t)
    late = [v for ts, v in messages[cut:] if ts < t]
    assert state.late_count == len(late)
    assert state.get() == sum(v for _, v in messages) - sum(late)


gearpump_events = st.lists(
    st.one_of(
        st.tuples(st.just("msg"), st.integers(0, 350), st.integers(-100, 100)),
        st.tuples(st.just("wm"), st.integers(0, 250), st.just(0)),
    ),
    max_size=50,
)


def drive(state: NonWindowState, manager: CheckpointManager, stream) -> list[tuple[int, bytes]]:
    """Gearpump's task loop: each message arms the manager and sets the state's next
    checkpoint time; each watermark takes the checkpoints that are due."""
    taken = []
    for kind, ts, value in stream:
        if kind == "msg":
            state.set_next_checkpoint_time(manager.update(ts))
            state.update(ts, value)
        else:
            while (t := manager.due(ts)) is not None:
                state.set_next_checkpoint_time(t)
                data = state.checkpoint()
                manager.checkpoint(t, data)
                taken.append((t, data))
    return taken


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gearpump_events)
def test_a_non_window_state_on_gearpumps_schedule_recovers_exactly_once(tmp_path_factory, events_):
    """Every checkpoint holds exactly the messages before its time, and recovering any of
    them and replaying the messages from its time on reaches the uninterrupted state."""
    stream, watermark = [], 0
    for kind, amount, value in events_:
        if kind == "wm":
            watermark += amount
            stream.append(("wm", watermark, 0))
        else:
            stream.append(("msg", watermark + amount, value))  # never behind the watermark
    monoid, root, fs = Sum(), str(tmp_path_factory.mktemp("nws")), LocalFileSystem()
    original = NonWindowState(monoid)
    taken = drive(original, CheckpointManager(100, CheckpointStore(fs, root, "t")), stream)
    messages = [(ts, v) for kind, ts, v in stream if kind == "msg"]
    assert original.late_count == 0
    assert original.get() == sum(v for _, v in messages)
    for t, data in taken:
        assert monoid.decode(data) == sum(v for ts, v in messages if ts < t), t
        manager = CheckpointManager(100, CheckpointStore(fs, root, "t"))
        recovered = NonWindowState(monoid)
        recovered.recover(t, manager.recover(t))
        drive(recovered, manager, [e for e in stream if e[0] == "wm" or e[1] >= t])
        assert recovered.get() == original.get(), t
        assert recovered.late_count == 0


# == WindowState ======================================================================


def test_a_window_state_needs_a_window():
    with pytest.raises(StateValueError, match="Window"):
        WindowState(Sum(), 100)  # type: ignore[arg-type]


def test_tumbling_windows_close_when_the_watermark_reaches_their_end():
    state = WindowState(Sum(), Window(100))
    for ts, v in [(10, 1), (99, 2), (100, 4), (250, 8)]:
        state.update(ts, v)
    assert state.on_watermark(99) == []
    assert state.on_watermark(100) == [WindowResult(0, 100, 3)]
    assert state.on_watermark(300) == [WindowResult(100, 200, 4), WindowResult(200, 300, 8)]


def test_sliding_windows_hold_every_message_of_their_range():
    state = WindowState(Sum(), Window(300, 100))
    for ts, v in [(50, 1), (150, 10), (250, 100), (350, 1000)]:
        state.update(ts, v)
    assert state.on_watermark(700) == [
        WindowResult(0, 300, 111),
        WindowResult(100, 400, 1110),
        WindowResult(200, 500, 1100),
        WindowResult(300, 600, 1000),
    ]


def test_windows_without_messages_are_not_emitted():
    state = WindowState(Count(), Window(100))
    state.update(450, 1)
    assert state.on_watermark(1000) == [WindowResult(400, 500, 1)]


def test_get_maps_each_open_window_to_its_value_so_far():
    state = WindowState(Max(), Window(300, 100))
    for ts, v in [(50, 1), (150, 7), (250, 3)]:
        state.update(ts, v)
    assert state.get() == {0: 7, 100: 7, 200: 3}
    state.on_watermark(300)
    assert state.get() == {100: 7, 200: 3}


def test_a_closed_window_is_emitted_exactly_once():
    state = WindowState(Sum(), Window(100))
    state.update(10, 1)
    assert state.on_watermark(150) == [WindowResult(0, 100, 1)]
    assert state.on_watermark(150) == []
    assert state.on_watermark(120) == []
    assert state.on_watermark(180) == []


def test_a_message_for_a_closed_window_is_late_counted_and_not_applied():
    state = WindowState(Sum(), Window(300, 100))
    state.update(50, 1)
    state.on_watermark(310)
    assert state.update(309, 5) is False
    assert state.update(0, 5) is False
    assert state.late_count == 2
    assert state.update(310, 5) is True
    assert state.on_watermark(1000) == [
        WindowResult(100, 400, 5),
        WindowResult(200, 500, 5),
        WindowResult(300, 600, 5),
    ]


def test_a_message_before_the_last_checkpoint_is_late():
    state = WindowState(Sum(), Window(300, 100), checkpoint_interval_ms=100)
    state.update(150, 1)
    state.set_next_checkpoint_time(200)
    state.checkpoint()
    assert state.update(199, 1) is False
    assert state.late_count == 1


def test_bad_input_to_a_window_state_raises_and_changes_nothing():
    state = WindowState(Sum(float), Window(100))
    state.update(10, 1.0)
    with pytest.raises(StateValueError):
        state.update(-5, 1.0)
    with pytest.raises(MonoidValueError):
        state.update(20, math.nan)
    with pytest.raises(MonoidTypeError):
        state.update(20, "x")
    assert state.get() == {0: 1.0}
    assert state.late_count == 0


def test_a_window_state_checkpoint_before_set_next_checkpoint_time_raises():
    state = WindowState(Sum(), Window(100))
    with pytest.raises(StateValueError, match="set_next_checkpoint_time"):
        state.checkpoint()


def test_a_window_state_checkpoint_must_be_a_multiple_of_the_interval():
    state = WindowState(Sum(), Window(300, 100), checkpoint_interval_ms=1000)
    state.set_next_checkpoint_time(1500)
    with pytest.raises(StateValueError, match="multiple of 1000"):
        state.checkpoint()


def test_window_state_recover_rejects_bytes_of_another_window_or_time():
    state = WindowState(Sum(), Window(300, 100))
    state.update(10, 1)
    state.on_watermark(200)
    state.set_next_checkpoint_time(200)
    data = state.checkpoint()
    with pytest.raises(CorruptCheckpointError, match="buckets"):
        WindowState(Sum(), Window(300, 150)).recover(200, data)
    with pytest.raises(CorruptCheckpointError, match="200"):
        WindowState(Sum(), Window(300, 100)).recover(300, data)
    with pytest.raises(CorruptCheckpointError):
        WindowState(Max(), Window(300, 100)).recover(200, data)


def test_checkpoint_before_the_watermark_callback_does_not_lose_the_windows_it_closes():
    """The framework may checkpoint at ``T`` (the watermark has passed ``T``) before it
    calls ``on_watermark``; the windows ending at or before ``T`` have not been emitted
    yet and must still be, with their values (or the checkpoint must refuse loudly)."""
    state = WindowState(Sum(), Window(100), checkpoint_interval_ms=100)
    state.update(50, 1)
    state.update(150, 2)
    state.set_next_checkpoint_time(100)
    try:
        state.checkpoint()
    except StateValueError:
        return  # refusing is acceptable; silently dropping the window is not
    assert state.on_watermark(200) == [WindowResult(0, 100, 1), WindowResult(100, 200, 2)]


# -- WindowState against brute force -------------------------------------------------

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
    """Drives a WindowState through events like the framework: messages, then on a
    watermark advance ``on_watermark`` followed by a checkpoint at the newest boundary
    the watermark passed. Records every emitted window and every checkpoint."""

    def __init__(self, state: WindowState, interval: int):
        self.state, self.interval = state, interval
        self.emitted: list[WindowResult] = []
        self.checkpoints: list[tuple[int, int, bytes]] = []  # (event index, time, data)
        self.last_checkpoint = 0

    def play(self, stream, start_index=0):
        for index, (kind, ts, value) in enumerate(stream, start_index):
            if kind == "msg":
                self.state.update(ts, value)
            else:
                self.emitted += self.state.on_watermark(ts)
                boundary = boundary_at_or_before(ts, self.interval)
                if boundary > self.last_checkpoint:
                    self.state.set_next_checkpoint_time(boundary)
                    self.checkpoints.append((index, boundary, self.state.checkpoint()))
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


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(WINDOWS), st.sampled_from(INTERVALS), events)
def test_window_results_equal_a_brute_force_computation(window, interval, events_):
    stream = absolute(events_)
    run = Run(WindowState(Sum(), window, checkpoint_interval_ms=interval), interval)
    run.play(stream)
    expected, late = brute_force(stream, window, interval)
    starts = [r.start_ms for r in run.emitted]
    assert len(starts) == len(set(starts)), "a window was emitted twice"
    assert starts == sorted(starts)
    assert all(r.end_ms == r.start_ms + window.size_ms for r in run.emitted)
    assert {r.start_ms: r.value for r in run.emitted} == expected
    assert run.state.late_count == late


def rows(data: bytes, window: Window, interval: int) -> list:
    """The (bucket, value) rows of checkpoint bytes (the counters left aside)."""
    table = KeyedTable.decode(data, Sum(), interval, window)
    return sorted(zip(table.buckets.tolist(), table.values.tolist()))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(WINDOWS), st.sampled_from(INTERVALS), events, st.data())
def test_recover_and_replay_from_a_checkpoint_gives_the_same_later_windows(window, interval, events_, data):
    """The exactly-once property: recovering the checkpoint at ``T`` and replaying the
    messages with ``ts >= T`` (and the watermarks) emits, for every window ending after
    ``T``, the value the uninterrupted run emitted, and nothing else."""
    stream = absolute(events_)
    original = Run(WindowState(Sum(), window, checkpoint_interval_ms=interval), interval)
    original.play(stream)
    if not original.checkpoints:
        return
    _, t, checkpoint = data.draw(st.sampled_from(original.checkpoints))

    recovered = Run(WindowState(Sum(), window, checkpoint_interval_ms=interval), interval)
    recovered.state.recover(t, checkpoint)
    recovered.last_checkpoint = t
    recovered.play([e for e in stream if e[0] == "wm" or e[1] >= t])

    later = {r.start_ms: r.value for r in original.emitted if r.end_ms > t}
    assert {r.start_ms: r.value for r in recovered.emitted} == later
    # and the replay takes the same later checkpoints, holding the same panes
    assert [(ts, rows(d, window, interval)) for _, ts, d in recovered.checkpoints] == [
        (ts, rows(d, window, interval)) for _, ts, d in original.checkpoints if ts > t
    ]


def test_panes_are_pruned_at_checkpoints_so_the_state_stays_bounded():
    window, interval = Window(300, 100), 100
    state = WindowState(Sum(), window, checkpoint_interval_ms=interval)
    run = Run(state, interval)
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
    assert sum(r.value for r in run.emitted) <= total * 3
    assert len(run.checkpoints) == 999


def test_a_window_state_through_a_checkpoint_manager_and_store_recovers(tmp_path):
    """End to end with Gearpump's schedule: a CheckpointManager arms the checkpoint
    times, the store keeps the bytes, a restarted task recovers and replays."""
    window, interval = Window(200, 100), 100
    stream = [
        ("msg", 10, 1), ("msg", 120, 2), ("wm", 150, 0),
        ("msg", 180, 4), ("msg", 260, 8), ("wm", 300, 0),
        ("msg", 330, 16), ("msg", 410, 32), ("wm", 450, 0),
        ("msg", 520, 64), ("msg", 640, 128), ("wm", 800, 0),
    ]  # fmt: skip
    fs = LocalFileSystem()

    def run(state, manager, events_):
        results = []
        for kind, ts, value in events_:
            if kind == "msg":
                state.update(ts, value)
                manager.update(ts)
            else:
                results += state.on_watermark(ts)
                while (t := manager.due(ts)) is not None:
                    state.set_next_checkpoint_time(t)
                    manager.checkpoint(t, state.checkpoint())
        return results

    store = CheckpointStore(fs, str(tmp_path), "w")
    first = run(WindowState(Sum(), window, interval), CheckpointManager(interval, store), stream)
    # Gearpump's rule arms 100, 200, 300, 400, 500, 700; the idle fix adds 800
    assert store.times() == [100, 200, 300, 400, 500, 700, 800]
    messages = [(ts, v) for kind, ts, v in stream if kind == "msg"]
    assert [r.value for r in first] == [
        sum(v for ts, v in messages if r.start_ms <= ts < r.end_ms) for r in first
    ]
    assert [r.start_ms for r in first] == list(window.starts_closing(0, 800))

    for t in store.times():
        manager = CheckpointManager(interval, CheckpointStore(fs, str(tmp_path), "w"))
        state = WindowState(Sum(), window, interval)
        state.recover(t, manager.recover(t))
        replayed = run(state, manager, [e for e in stream if e[0] == "wm" or e[1] >= t])
        assert replayed == [r for r in first if r.end_ms > t], t


def test_a_non_window_state_with_ttl_builds_tables_that_expire_keys():
    spec = NonWindowState(Sum(), ttl_ms=1000)
    table = spec.new_table(100)
    assert (spec.ttl_ms, table.ttl_ms, NonWindowState(Sum()).new_table(100).ttl_ms) == (1000, 1000, None)


@pytest.mark.parametrize("ttl", [0, -1, 2.5, False])
def test_a_ttl_that_is_not_a_positive_int_is_refused_naming_the_state_and_value(ttl):
    with pytest.raises(StateValueError, match=rf"NonWindowState\(.*\): ttl_ms must be .* got {ttl!r}"):
        NonWindowState(Sum(), ttl_ms=ttl)


def test_a_window_state_takes_no_ttl():
    with pytest.raises(TypeError, match="ttl_ms"):
        WindowState(Sum(), Window(100), ttl_ms=1000)
