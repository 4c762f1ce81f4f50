"""Key groups without Spark: both task forms agree, and a restore from a checkpoint
followed by a replay gives the result of an uninterrupted run."""

from __future__ import annotations

import struct
import tempfile
import zlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiles import examples

from monoids import Count, Last, Sum, Timestamped
from persistent import KeyGroup, PersistentTask, TaskDefinitionError
from persistent.core.badrecords import BadRecords
from persistent.examples.count import MessageCount, VectorizedCount
from persistent.runtime.group_state import Base
from persistent.runtime.kept import KeptCheckpoint
from persistent.runtime.keygroup import Taken, whole_every_ms
from persistent.storage.checkpoint_store import CheckpointStore, decode_record, encode_record
from persistent.storage.fs import LocalFileSystem
from persistent.tools.testing import TaskTester
from state import NonWindowState, SessionWindow, Window, WindowState
from state.errors import CorruptCheckpointError, MissingCheckpointError, StateValueError
from state.tables import Stored, decode_table


class WindowSum(PersistentTask):
    def persistent_state(self):
        return WindowState(Sum(), Window(40, 20))

    def process_batch(self, messages):
        return messages["value"].to_numpy(dtype=np.int64)


class SessionCount(PersistentTask):
    def persistent_state(self):
        return WindowState(Count(), SessionWindow(30))

    def process_batch(self, messages):
        return np.ones(len(messages), dtype=np.int64)


messages_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 400), st.integers(0, 9)), max_size=60
)


def totals(results: list[pd.DataFrame]) -> dict:
    latest = {}
    for frame in results:
        latest.update(zip(frame["key"], frame["value"]))
    return latest


@given(messages_strategy)
@settings(max_examples=examples(40))
def test_per_message_and_vectorized_tasks_give_the_same_counts(messages):
    results = []
    for task in (MessageCount(), VectorizedCount()):
        tester = TaskTester(task, checkpoint_interval_ms=100)
        tester.send(sorted(messages, key=lambda m: m[1]))
        tester.advance_watermark(500)
        results.append(totals(tester.results))
    assert results[0] == results[1]
    assert results[0] == {k: sum(1 for m in messages if m[0] == k) for k in {m[0] for m in messages}}


@given(messages_strategy, st.integers(1, 4))
@settings(max_examples=examples(40))
def test_restore_from_a_checkpoint_and_replay_equals_an_uninterrupted_run(messages, cut):
    ordered = sorted(messages, key=lambda m: m[1])
    clean = TaskTester(WindowSum(), checkpoint_interval_ms=100)
    clean.send(ordered)
    clean.advance_watermark(600)

    crashed = TaskTester(WindowSum(), checkpoint_interval_ms=100)
    crashed.send([m for m in ordered if m[1] < cut * 100])
    crashed.advance_watermark(cut * 100)
    restored = crashed.restore(cut * 100)
    restored.send(ordered)  # the source rewinds; messages before the checkpoint are dropped
    restored.advance_watermark(600)

    def windows(testers):
        rows = pd.concat([r for t in testers for r in t.results])
        return {(k, s): v for k, s, v in zip(rows["key"], rows["window_start"], rows["value"])}

    assert windows([crashed, restored]) == windows([clean])


def test_a_message_that_bridges_two_sessions_merges_them_and_the_watermark_closes_the_merged_one():
    tester = TaskTester(SessionCount(), checkpoint_interval_ms=100)
    tester.send([("a", 10, 0), ("a", 35, 0), ("a", 90, 0), ("b", 20, 0)])  # a: [10, 65) and [90, 120)
    assert tester.advance_watermark(55).values.tolist() == [["b", 20, 50, 1]]
    tester.send([("a", 62, 0)])  # within the gap of both: one session [10, 120)
    assert tester.advance_watermark(119).empty
    assert tester.advance_watermark(120).values.tolist() == [["a", 10, 120, 4]]


@given(messages_strategy, st.integers(1, 4), st.integers(0, 3))
@settings(max_examples=examples(40))
def test_sessions_restored_from_a_checkpoint_and_replayed_equal_an_uninterrupted_run(messages, cut, batches):
    ordered = sorted(messages, key=lambda m: m[1])

    def run(tester, messages, until):
        for part in np.array_split(np.arange(len(messages)), batches + 1):
            chunk = [messages[i] for i in part]
            tester.send(chunk)
            tester.advance_watermark(max([m[1] for m in chunk], default=0))
        tester.advance_watermark(until)

    clean = TaskTester(SessionCount(), checkpoint_interval_ms=100)
    run(clean, ordered, 600)
    crashed = TaskTester(SessionCount(), checkpoint_interval_ms=100)
    run(crashed, [m for m in ordered if m[1] < cut * 100], cut * 100)
    restored = crashed.restore(cut * 100)
    run(restored, ordered, 600)  # the source rewinds; messages before the checkpoint are dropped

    def sessions(testers):
        rows = pd.concat([r for t in testers for r in t.results])
        return sorted(map(tuple, rows[["key", "window_start", "window_end", "value"]].values.tolist()))

    assert sessions([crashed, restored]) == sessions([clean])
    assert sum(row[3] for row in sessions([clean])) == len(messages)


def test_messages_behind_the_watermark_are_late_with_the_watermark_they_missed_and_change_nothing():
    tester = TaskTester(SessionCount(), checkpoint_interval_ms=100)
    tester.send([("a", 10, 0), ("a", 20, 0)])
    tester.advance_watermark(20)
    assert tester.send([("a", 19, 0), ("a", 20, 0), ("b", 5, 0)]) == 1  # at the watermark is in order
    assert [(r.reason, r.event_time_ms, r.watermark_ms, r.record) for r in tester.late] == [
        ("late", 19, 20, '{"key":"a","timestamp":19,"value":0}'),
        ("late", 5, 20, '{"key":"b","timestamp":5,"value":0}'),
    ]
    assert tester.late_count == 2
    assert tester.advance_watermark(50).values.tolist() == [["a", 10, 50, 3]]


class BackdatedCount(PersistentTask):
    """Counts each message at a time of its own: its value."""

    def persistent_state(self):
        return NonWindowState(Count())

    def process_message(self, state, message):
        state.update(message.value, 1)


def test_an_update_the_task_backdates_behind_the_last_checkpoint_is_late_not_applied():
    tester = TaskTester(BackdatedCount(), checkpoint_interval_ms=100)
    tester.send([("a", 50, 50)])
    tester.advance_watermark(100)  # checkpoint at 100
    assert tester.send([("a", 120, 80), ("a", 130, 130)]) == 1
    assert (tester.late_count, len(tester.late), tester.peek("a")) == (1, 0, 2)


def test_a_task_without_process_method_is_refused_before_it_runs():
    class Nothing(PersistentTask):
        def persistent_state(self):
            return NonWindowState(Count())

    with pytest.raises(TaskDefinitionError, match="process_message"):
        TaskTester(Nothing())


def test_process_batch_returning_the_wrong_number_of_values_names_the_task():
    class Short(VectorizedCount):
        def process_batch(self, messages):
            return np.ones(1, dtype=np.int64)

    tester = TaskTester(Short())
    with pytest.raises(TaskDefinitionError, match="Short.process_batch returned 1 values for 2 messages"):
        tester.send([("a", 1, 0), ("b", 2, 0)])
    assert tester.peek("a") == 0


class Relayed(VectorizedCount):
    """Counts each message at the key and time its value names."""

    def process_batch(self, messages):
        keys, times = zip(*messages["value"]) if len(messages) else ((), ())
        return pd.DataFrame({"key": list(keys), "timestamp": np.array(times, dtype=np.int64), "value": 1})


def test_updates_a_task_makes_as_a_frame_go_to_their_keys_and_times_and_their_results_are_no_windows():
    group = KeyGroup(Relayed(), 100)
    group.apply(pd.DataFrame({"key": ["a", "a"], "timestamp": [10, 20], "value": [("x", 150), ("y", 30)]}))
    results, (_, checkpoint, _) = group.advance(100)
    assert results.to_dict("list") == {"key": ["x", "y"], "window_start": [-1, -1], "window_end": [-1, -1],
                                       "value": [1, 1]}
    assert decode_table(checkpoint, Count(), 100).totals()[0].tolist() == ["y"]  # x at 150 is after the checkpoint


@pytest.mark.parametrize("frame, problem", [
    (pd.DataFrame({"key": ["a"], "timestamp": [1]}), r"returned a DataFrame without columns \['value'\]"),
    (pd.DataFrame({"key": ["a"], "timestamp": [1.0], "value": [1]}),
     "returned timestamps of dtype float64, not integer milliseconds"),
])
def test_a_frame_a_task_returns_needs_the_message_columns_and_integer_times(frame, problem):
    class Frames(VectorizedCount):
        def process_batch(self, messages):
            return frame

    with pytest.raises(TaskDefinitionError, match=f"Frames.process_batch {problem}"):
        KeyGroup(Frames(), 100).apply(pd.DataFrame({"key": ["a"], "timestamp": [1], "value": [1]}))


def test_a_watermark_that_is_no_time_is_refused_naming_it():
    with pytest.raises(StateValueError, match="watermark_ms must be"):
        KeyGroup(VectorizedCount(), 100).advance(-1)


def test_an_idle_group_checkpoints_from_the_watermark_alone():
    tester = TaskTester(VectorizedCount(), checkpoint_interval_ms=100)
    tester.send([("a", 5, 0)])
    tester.advance_watermark(150)
    tester.advance_watermark(420)
    assert sorted(tester.checkpoints) == [100, 400]


@given(messages_strategy)
@settings(max_examples=examples(30))
def test_a_group_without_checkpoints_gives_the_same_results_and_no_checkpoint_bytes(messages):
    ordered = pd.DataFrame(sorted(messages, key=lambda m: m[1]), columns=["key", "timestamp", "value"])
    groups = {taken: KeyGroup(WindowSum(), 100) for taken in (True, False)}
    outputs = {taken: [] for taken in groups}
    for watermark in (100, 250, 400, 600):
        for taken, group in groups.items():
            group.apply(ordered[(ordered["timestamp"] >= watermark - 150) & (ordered["timestamp"] < watermark)])
            outputs[taken].append(group.advance(watermark, checkpoint=taken))
    assert all(checkpoint is None for _, checkpoint in outputs[False])
    assert [taken.time_ms for _, taken in outputs[True]] == [100, 200, 400, 600]
    for (with_results, _), (without_results, _) in zip(outputs[True], outputs[False]):
        pd.testing.assert_frame_equal(with_results, without_results)
    assert groups[False].encode() == groups[True].encode()


class ExpiringCount(VectorizedCount):
    def __init__(self, ttl_ms: int | None):
        self.ttl_ms = ttl_ms

    def persistent_state(self):
        return NonWindowState(Count(), ttl_ms=self.ttl_ms)


def test_a_key_ttl_behind_the_watermark_stays_and_one_more_ms_expires_without_a_result():
    tester = TaskTester(ExpiringCount(500), checkpoint_interval_ms=100)
    tester.send([("a", 1000, 0), ("b", 1001, 0)])
    assert totals([tester.advance_watermark(1500)]) == {"a": 1, "b": 1}
    assert tester.advance_watermark(1501).empty  # a expires and emits nothing
    assert (tester.peek("a"), tester.peek("b")) == (0, 1)
    tester.send([("a", 1600, 0), ("b", 1501, 0)])  # b: ttl after its previous message, so kept
    assert totals([tester.advance_watermark(1600)]) == {"a": 1, "b": 2}  # a starts from zero


@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 700), st.integers(0, 9)), max_size=60),
    st.lists(st.integers(1, 130), min_size=6, max_size=6),
    st.integers(1, 250),
    st.integers(0, 4),
)
@settings(max_examples=examples(60))
def test_a_group_restored_from_a_checkpoint_expires_the_same_keys_as_an_uninterrupted_run(messages, steps, ttl, crash):
    watermarks = np.cumsum(steps).tolist()  # not on checkpoint boundaries
    batches = [[m for m in messages if low <= m[1] < high] for low, high in zip([0, *watermarks], watermarks)]

    def run(tester, batches, watermarks):
        for batch, watermark in zip(batches, watermarks):
            tester.send(batch)
            tester.advance_watermark(watermark)
        return tester

    clean = run(TaskTester(ExpiringCount(ttl), checkpoint_interval_ms=100), batches, watermarks)
    crashed = run(TaskTester(ExpiringCount(ttl), checkpoint_interval_ms=100), batches[:crash + 1], watermarks[:crash + 1])
    if not crashed.checkpoints:
        return
    restore_ms = max(crashed.checkpoints)
    # The source rewinds to the checkpoint; the replay runs the same micro-batches from the
    # one that took it, whose results reached the sink before the clock named the checkpoint.
    first = next(i for i, w in enumerate(watermarks) if w >= restore_ms)
    restored = run(crashed.restore(restore_ms), batches[first:], watermarks[first:])

    assert totals(crashed.results[:first + 1] + restored.results) == totals(clean.results)
    # A restored table may hold its rows in another order: compare what they hold.
    held = {t: held_by(data, ttl) for t, data in restored.checkpoints.items()}
    assert {t: held_by(clean.checkpoints[t], ttl) for t in restored.checkpoints} == held
    assert sorted(restored.group.table.totals()[0].tolist()) == sorted(clean.group.table.totals()[0].tolist())


def held_by(checkpoint: bytes, ttl: int) -> dict:
    """Each key of a Count checkpoint: its count and newest message time."""
    table = decode_table(checkpoint, Count(), 100, None, "checkpoint", ttl_ms=ttl)
    return {key: (int(value), int(time)) for key, value, time in zip(table.keys, table.values, table.times)}


def test_with_ttl_a_stream_of_always_new_keys_keeps_state_and_checkpoints_bounded():
    sizes = {}
    for ttl in (300, None):
        tester = TaskTester(ExpiringCount(ttl), checkpoint_interval_ms=100)
        rows, checkpoint_bytes = [], []
        for step in range(1, 41):
            tester.send([(f"k{step}-{i}", step * 100 - 50, 0) for i in range(50)])
            tester.advance_watermark(step * 100)
            rows.append(len(tester.group.table))
            checkpoint_bytes.append(len(tester.checkpoints[step * 100]))
        sizes[ttl] = rows, checkpoint_bytes
    rows, checkpoint_bytes = sizes[300]
    assert max(rows) == 50 * 3 and rows[-1] == rows[10]  # keys 50, 150 and 250 ms behind stay
    assert max(checkpoint_bytes[10:]) <= 1.1 * checkpoint_bytes[10]
    rows, checkpoint_bytes = sizes[None]
    assert rows[-1] == 50 * 40 and checkpoint_bytes[-1] > 3 * checkpoint_bytes[10]


def test_a_checkpoint_keeps_the_keys_its_own_watermark_expires_so_a_replay_in_other_batches_emits_full_counts():
    messages = [("a", 90, 0), ("a", 120, 0)]
    tester = TaskTester(ExpiringCount(50), checkpoint_interval_ms=100)
    tester.send(messages)
    assert totals([tester.advance_watermark(50)]) == {"a": 2}
    tester.advance_watermark(180)  # checkpoint at 100, then a (newest 120) expires
    assert (sorted(tester.checkpoints), tester.peek("a")) == ([100], 0)
    # Path B on Spark: the first micro-batch after the restore runs at the restore point.
    restored = tester.restore(100)
    restored.send(messages)
    assert totals([restored.advance_watermark(100)]) == {"a": 2}


@pytest.mark.parametrize("batches", [[[("k", 100, 0), ("k", 1200, 0)]], [[("k", 100, 0)], [("k", 1200, 0)]]])
def test_a_message_more_than_ttl_after_its_keys_previous_one_starts_from_zero_in_any_batching(batches):
    tester = TaskTester(ExpiringCount(1000), checkpoint_interval_ms=100)
    for batch in batches:
        tester.send(batch)
        tester.advance_watermark(100)
    assert totals(tester.results) == {"k": 1}


@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 1500), st.integers(0, 9)), max_size=40),
    st.integers(1, 400),
    st.data(),
)
@settings(max_examples=examples(100))
def test_with_ttl_the_results_do_not_depend_on_how_the_messages_are_batched(messages, ttl, data):
    """Messages in time order, cut into micro-batches at random; each batch runs at the
    watermark of the batches before it (the newest event time they held)."""
    ordered = sorted(messages, key=lambda m: m[1])

    def run(cuts):
        tester = TaskTester(ExpiringCount(ttl), checkpoint_interval_ms=100)
        bounds = [0, *sorted(cuts), len(ordered)]
        watermark = 0
        for low, high in zip(bounds, bounds[1:]):
            tester.send(ordered[low:high])
            tester.advance_watermark(watermark)
            watermark = max([watermark, *(m[1] for m in ordered[low:high])])
        tester.advance_watermark(watermark)
        return totals(tester.results)

    cut_points = st.sets(st.integers(1, max(len(ordered) - 1, 1)))
    assert run(data.draw(cut_points)) == run(data.draw(cut_points))


def _counted_group_and_checkpoint() -> tuple[KeyGroup, Taken]:
    group = KeyGroup(VectorizedCount(), 100)
    group.apply(pd.DataFrame({"key": [f"k{i % 50}" for i in range(400)], "timestamp": list(range(400)),
                              "value": [1] * 400}))
    _, checkpoint = group.advance(250)
    return group, checkpoint


def _counted_group() -> KeyGroup:
    return _counted_group_and_checkpoint()[0]


def test_a_groups_state_is_compressed_and_decodes_to_the_same_table():
    group = _counted_group()
    encoded = group.encode()
    assert len(encoded) < len(group.table.encode()) / 2
    again = KeyGroup.decode(VectorizedCount(), 100, 0, encoded)
    assert again.table.encode() == group.table.encode()


def test_a_groups_state_is_a_checkpoint_record_of_the_tables_size_and_compressed_bytes():
    group = _counted_group()
    table = group.table.encode()
    stamp, payload = decode_record(group.encode(), "state")
    assert stamp == 0
    assert payload[:8] == struct.pack(">Q", len(table))
    assert pa.decompress(payload[8:], decompressed_size=len(table), codec="zstd", asbytes=True) == table


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_a_groups_state_decodes_from_any_bytes_like_value(kind):
    group = _counted_group()
    again = KeyGroup.decode(VectorizedCount(), 100, 0, kind(group.encode()))
    assert again.table.encode() == group.table.encode()


def _earlier_frame(table: bytes) -> bytes:
    """A state as the versions before the checkpoint record wrote it: magic, size and
    CRC32 of the table's bytes, then those bytes compressed with zstd."""
    return struct.pack(">4sQI", b"PKGZ", len(table), zlib.crc32(table)) + pa.compress(table, codec="zstd", asbytes=True)


def test_a_state_of_an_earlier_version_uncompressed_still_decodes():
    group = _counted_group()
    table = group.table.encode()
    assert table[:4] == b"PKTB"
    again = KeyGroup.decode(VectorizedCount(), 100, 0, table)
    assert again.encode() == group.encode()


def test_a_state_of_an_earlier_version_in_its_own_compressed_frame_still_decodes():
    group = _counted_group()
    again = KeyGroup.decode(VectorizedCount(), 100, 0, _earlier_frame(group.table.encode()))
    assert again.encode() == group.encode()


@pytest.mark.parametrize("damage", [lambda b: b[:-5], lambda b: b[:10], lambda b: b[:4] + b"\xff" * 8 + b[12:],
                                    lambda b: b[:-1] + bytes([b[-1] ^ 1])])
@pytest.mark.parametrize("encode", [KeyGroup.encode, lambda group: _earlier_frame(group.table.encode())],
                         ids=["record", "earlier frame"])
def test_a_damaged_compressed_state_is_a_corrupt_checkpoint_error(damage, encode):
    with pytest.raises(CorruptCheckpointError, match="key group state"):
        KeyGroup.decode(VectorizedCount(), 100, 0, damage(encode(_counted_group())))


def _flipped_bits(encoded: bytes, start: int = 0):
    """``(offset, bit, bytes)``: ``encoded`` with its lowest or highest bit of one byte
    from ``start`` on flipped, for each."""
    for offset in range(start, len(encoded)):
        for bit in (0x01, 0x80):
            flipped = bytearray(encoded)
            flipped[offset] ^= bit
            yield offset, bit, bytes(flipped)


def test_a_flipped_bit_of_a_compressed_state_is_a_corrupt_checkpoint_error():
    # The record's CRC32 covers its header and payload; a damaged magic is no such
    # record, and the table's decoder refuses it.
    for _, _, flipped in _flipped_bits(_counted_group().encode()):
        with pytest.raises(CorruptCheckpointError, match="key group state"):
            KeyGroup.decode(VectorizedCount(), 100, 0, flipped)


def test_a_flipped_bit_of_an_earlier_versions_compressed_state_is_a_corrupt_checkpoint_error_or_changes_nothing():
    table = _counted_group().table.encode()
    encoded = _earlier_frame(table)
    refused = 0
    # From 4: a damaged magic is no such frame but an earlier version's table.
    for offset, bit, flipped in _flipped_bits(encoded, 4):
        try:
            decoded = KeyGroup.decode(VectorizedCount(), 100, 0, flipped)
        except CorruptCheckpointError as exc:
            assert "key group state" in str(exc)
            refused += 1
        else:  # a bit zstd's decoder does not read
            assert decoded.table.encode() == table, (offset, bit)
    assert refused > 1.9 * (len(encoded) - 4)


# -- a state that follows the group's checkpoint ------------------------------------


def _micro_batches(task: PersistentTask, batches: list[list[tuple]], store: CheckpointStore, follow: bool,
                   workers: list[KeptCheckpoint] | None = None):
    """What the runtime does per micro-batch: the group decoded from its last state
    (by the process whose ``KeptCheckpoint`` is the batch's of ``workers``, in turn, if
    given), the batch applied with the watermark the batches before it reached, results
    and a checkpoint at the new watermark, the checkpoint persisted (and, to ``follow``
    it, noted), the state encoded. Returns each batch's results (sorted rows) and states."""
    state, watermark, results, states = None, 0, [], []
    for number, batch in enumerate(batches):
        kept = workers[number % len(workers)] if workers else None
        group = KeyGroup.decode(task, 100, 0, state, store.recover, kept) if state else KeyGroup(task, 100)
        frame = pd.DataFrame(batch, columns=["key", "timestamp", "value"]) if batch else pd.DataFrame(
            {"key": np.empty(0, object), "timestamp": np.empty(0, np.int64), "value": np.empty(0, np.int64)})
        group.apply(frame, BadRecords.FAIL, watermark)
        watermark = max([watermark, *(m[1] for m in batch)])
        out, checkpoint = group.advance(watermark)
        if checkpoint:
            written = store.persist(*checkpoint)
            if follow:
                group.checkpointed(Base(checkpoint[0], written.crc))
        state = group.encode(kept)
        results.append(sorted(map(tuple, out.values.tolist())))
        states.append(state)
    return results, states


class VectorizedLast(PersistentTask):
    """Each key's newest value: ``Last``, which is not commutative."""

    def persistent_state(self):
        return NonWindowState(Last())

    def process_batch(self, messages):
        return [Timestamped(int(t), int(v)) for t, v in zip(messages["timestamp"], messages["value"])]


class LongWindowSum(WindowSum):
    """Windows longer than the checkpoint interval: panes outlive a checkpoint."""

    def persistent_state(self):
        return WindowState(Sum(), Window(300, 100))


@pytest.mark.parametrize("task", [VectorizedCount(), VectorizedLast(), ExpiringCount(150), WindowSum(),
                                  LongWindowSum(), SessionCount()],
                         ids=["count", "last", "ttl", "window", "long window", "session"])
@given(messages_strategy, st.lists(st.integers(0, 60), min_size=1, max_size=6),
       st.lists(st.integers(0, 2), min_size=1, max_size=8))
@settings(max_examples=examples(40))
def test_a_state_that_follows_its_checkpoint_gives_the_results_of_a_whole_state(task, messages, cuts, serving):
    # In the order drawn: batches after the watermark has passed some of their messages have late ones.
    bounds = [0, *sorted(cuts), len(messages)]
    batches = [messages[low:high] for low, high in zip(bounds, bounds[1:])] + [[]]
    with tempfile.TemporaryDirectory() as whole_root, tempfile.TemporaryDirectory() as following_root:
        fs = LocalFileSystem()
        whole, whole_states = _micro_batches(task, batches, CheckpointStore(fs, whole_root, "g"), follow=False)
        read = CheckpointStore(fs, following_root, "g")
        following, states = _micro_batches(task, batches, read, follow=True)
        # Processes that keep what they decode and hand: three, serving the batches in the order drawn.
        workers = [KeptCheckpoint() for _ in range(3)]
        store = CheckpointStore(fs, following_root, "kept")
        kept, kept_states = _micro_batches(task, batches, store, follow=True, workers=[workers[w] for w in serving])
        checkpoints = [[(t, store.read(t).data) for t in store.times()] for store in (read, store)]
    assert following == whole == kept
    assert kept_states == states
    assert checkpoints[1] == checkpoints[0]  # byte for byte
    assert all(decode_record(state, "state")[0] == 0 for state in whole_states)
    following_ones = task.state_spec().build(100).follows_checkpoints  # with a ttl_ms, states are whole
    if following_ones and any(m[1] >= 100 for batch in batches[:-1] for m in batch):  # a checkpoint before the last
        assert any(decode_record(state, "state")[0] > 0 for state in states)


def test_a_worker_goes_on_from_its_table_only_where_its_state_decodes_to_the_same_rows_in_the_same_order(tmp_path):
    # The first batch brings a pane after the checkpoint at 100 before one before it: the
    # table holds them in that order, its state decodes the checkpoint's pane first, and
    # both panes are in the next checkpoint, in the order the table holds them.
    batches = [[("a", 150, 1), ("b", 90, 1)], [("c", 250, 1)], [("d", 350, 1)], []]
    fs = LocalFileSystem()
    read, kept = (CheckpointStore(fs, str(tmp_path), name) for name in ("read", "kept"))
    worker = KeptCheckpoint()
    assert _micro_batches(LongWindowSum(), batches, kept, True, [worker]) == \
        _micro_batches(LongWindowSum(), batches, read, True)
    assert [kept.read(t).data for t in kept.times()] == [read.read(t).data for t in read.times()]


def _recorded(store: CheckpointStore):
    """The times of the checkpoints read, and ``store.recover``, which records them."""
    reads = []

    def checkpoints(time_ms, crc, known):
        reads.append(time_ms)
        return store.recover(time_ms, crc, known)

    return reads, checkpoints


def test_a_worker_that_handed_a_whole_state_after_one_that_follows_a_checkpoint_keeps_that_checkpoint(tmp_path):
    store = CheckpointStore(LocalFileSystem(), str(tmp_path), "g")
    reads, checkpoints = _recorded(store)

    kept, (group, checkpoint) = KeptCheckpoint(), _counted_group_and_checkpoint()
    group.checkpointed(Base(checkpoint.time_ms, store.persist(*checkpoint).crc))
    following = group.encode(kept)  # follows the checkpoint at 200
    group.advance(350, checkpoint=False)  # sealed at 300 without a checkpoint: the state is whole
    assert decode_record(group.encode(kept), "state")[0] == 0

    def rows(table):
        return list(zip(table.keys, table.buckets, table.values.tolist()))

    # The micro-batch again: its state follows the checkpoint at 200, kept from the first table.
    again = KeyGroup.decode(VectorizedCount(), 100, 0, following, checkpoints, kept)
    assert reads == []
    assert rows(again.table) == rows(KeyGroup.decode(VectorizedCount(), 100, 0, following, checkpoints).table)


def test_a_state_that_follows_its_checkpoint_holds_only_the_rows_since_and_decodes_to_the_same_table(tmp_path):
    store = CheckpointStore(LocalFileSystem(), str(tmp_path), "g")
    group = KeyGroup(VectorizedCount(), 100)
    group.apply(pd.DataFrame({"key": [f"k{i}" for i in range(2000)], "timestamp": [50] * 1990 + [150] * 10,
                              "value": [1] * 2000}))
    _, (time_ms, data, _) = group.advance(120)
    written = store.persist(time_ms, data)
    whole = group.encode()
    group.checkpointed(Base(time_ms, written.crc))
    following = group.encode()
    assert decode_record(following, "state")[0] == 100
    assert len(following) < len(whole) / 10
    again = KeyGroup.decode(VectorizedCount(), 100, 0, following, store.recover)
    assert again.base == Base(100, written.crc)
    rows = lambda table: sorted(zip(table.keys, table.buckets, table.values.tolist()))  # noqa: E731
    assert rows(again.table) == rows(group.table)
    counters = lambda table: (table.checkpoint_ms, table.emitted_ms, table.late_count)  # noqa: E731
    assert counters(again.table) == counters(group.table) == (100, 0, 0)
    assert again.encode() == following


def test_a_worker_goes_on_from_the_table_it_handed_in_place_and_a_retry_decodes_the_state(tmp_path):
    store = CheckpointStore(LocalFileSystem(), str(tmp_path), "g")
    reads, checkpoints = _recorded(store)
    kept, (group, checkpoint) = KeptCheckpoint(), _counted_group_and_checkpoint()
    group.checkpointed(Base(checkpoint.time_ms, store.persist(*checkpoint).crc))
    handed = group.encode(kept)

    def rows(table):
        return list(zip(table.keys, table.buckets, table.values.tolist()))

    expected = rows(KeyGroup.decode(VectorizedCount(), 100, 0, handed, checkpoints).table)
    first = KeyGroup.decode(VectorizedCount(), 100, 0, handed, checkpoints, kept)
    ids = first.table._row_ids()
    assert rows(first.table) == expected and len(reads) == 1  # the decoding without the kept table
    first.apply(pd.DataFrame({"key": ["k1", "new"], "timestamp": [260, 270], "value": [5, 7]}), watermark_ms=250)
    first.advance(350)
    assert np.shares_memory(first.table._row_ids(), ids)  # in place
    # The attempt failed: Spark hands the same state again, which the worker no longer
    # keeps as a table; it reads the checkpoint it follows.
    again = KeyGroup.decode(VectorizedCount(), 100, 0, handed, checkpoints, kept)
    assert rows(again.table) == expected and len(reads) == 2


def test_a_worker_rolls_the_table_it_handed_forward_in_place_after_another_served_a_batch(tmp_path):
    store = CheckpointStore(LocalFileSystem(), str(tmp_path), "g")
    reads, checkpoints = _recorded(store)
    worker, other = KeptCheckpoint(), KeptCheckpoint()
    group, checkpoint = _counted_group_and_checkpoint()
    group.checkpointed(Base(checkpoint.time_ms, store.persist(*checkpoint).crc))
    handed = group.encode(worker)
    ids, values = group.table._row_ids(), group.table.values
    served = KeyGroup.decode(VectorizedCount(), 100, 0, handed, checkpoints, other)  # by the other worker
    served.apply(pd.DataFrame({"key": ["k1", "new"], "timestamp": [410, 420], "value": [5, 7]}), watermark_ms=250)
    _, checkpoint = served.advance(350)
    served.checkpointed(Base(checkpoint.time_ms, store.persist(*checkpoint).crc))
    state = served.encode(other)

    def rows(table):
        return list(zip(table.keys, table.buckets, table.values.tolist()))

    expected = rows(KeyGroup.decode(VectorizedCount(), 100, 0, state, checkpoints).table)
    del reads[:]
    back = KeyGroup.decode(VectorizedCount(), 100, 0, state, checkpoints, worker)
    assert rows(back.table) == expected and reads == [300]  # the changes since the checkpoint it held
    assert np.shares_memory(back.table._row_ids(), ids) and np.shares_memory(back.table.values, values)
    # The worker no longer keeps the table: a retry reads the whole chain.
    again = KeyGroup.decode(VectorizedCount(), 100, 0, state, checkpoints, worker)
    assert rows(again.table) == expected and len(reads) == 2


def _following_state(store: CheckpointStore) -> bytes:
    """The state of ``_counted_group``, following its checkpoint at 200 in ``store``."""
    group, checkpoint = _counted_group_and_checkpoint()
    group.checkpointed(Base(checkpoint[0], store.persist(*checkpoint).crc))
    return group.encode()


def test_a_kept_checkpoint_is_read_once_and_serves_only_the_checkpoint_it_was_read_from(tmp_path):
    store = CheckpointStore(LocalFileSystem(), str(tmp_path), "g")
    reads, checkpoints = _recorded(store)

    def decoded(state, kept=None):
        group = KeyGroup.decode(VectorizedCount(), 100, 0, state, checkpoints, kept)
        return sorted(zip(group.table.keys, group.table.buckets, group.table.values.tolist())), group

    kept, state = KeptCheckpoint(), _following_state(store)
    first, group = decoded(state, kept)
    group.apply(pd.DataFrame({"key": ["new"], "timestamp": [250], "value": [1]}), watermark_ms=200)
    assert decoded(state, kept)[0] == first == decoded(state)[0]  # the kept table is not the group's
    assert reads == [200, 200]  # the first decoding and the one without a kept checkpoint

    # The checkpoint written again (a rewind, a path-B restart, a rescale): another CRC32, read again.
    group = KeyGroup(VectorizedCount(), 100)
    group.apply(pd.DataFrame({"key": ["other"] * 3, "timestamp": [10, 120, 210], "value": [1] * 3}))
    _, (time_ms, data, _) = group.advance(250)
    group.checkpointed(Base(time_ms, store.persist(time_ms, data).crc))
    other = group.encode()
    assert decoded(other, kept)[0] == decoded(other)[0] != first
    assert reads == [200, 200, 200, 200]
    # A replay of the micro-batch before: the state follows the earlier checkpoint again.
    store.persist(*_counted_group_and_checkpoint()[1])
    assert decoded(state, kept)[0] == first and reads[-1] == 200 and len(reads) == 5
    # Another interval or state of the same checkpoint is read again (and refused).
    with pytest.raises(CorruptCheckpointError):
        KeyGroup.decode(VectorizedCount(), 50, 0, state, checkpoints, kept)
    with pytest.raises(CorruptCheckpointError):
        KeyGroup.decode(WindowSum(), 100, 0, state, checkpoints, kept)
    assert len(reads) == 7
    assert decoded(state, kept)[0] == first and len(reads) == 7  # what was kept stays


def test_a_checkpoint_after_a_durable_one_holds_its_changes_until_they_add_up_to_the_table(tmp_path):
    store = CheckpointStore(LocalFileSystem(), str(tmp_path), "g")
    group, twin = KeyGroup(VectorizedCount(), 100), KeyGroup(VectorizedCount(), 100)  # the twin's are not durable
    taken, states, chains = [], [], []
    for boundary in range(100, 1700, 100):  # a state that grows: a new key each interval, and "every"
        messages = pd.DataFrame({"key": [f"k{boundary}", "every"], "timestamp": [boundary - 50] * 2, "value": [1, 1]})
        for one in (group, twin):
            one.apply(messages, watermark_ms=boundary - 100)
        rows, chain_rows = len(group.table), group.table.chain_rows
        _, checkpoint = group.advance(boundary)
        assert (checkpoint.base is None) is (boundary == 100 or chain_rows >= rows)
        twins = twin.advance(boundary)[1]
        group.checkpointed(Base(boundary, store.persist(*checkpoint).crc))
        taken.append((checkpoint, twins))
        states.append(group.encode())
        chains.append((group.table.whole_ms, group.table.chain_rows))
    # Each changes 2 rows: the chains grow with the table (rows: one per key checkpointed, and the two new ones).
    assert [c.base is None for c, _ in taken] == [True] + [False] * 4 + [True] + [False] * 9 + [True]
    assert (group.table.whole_ms, group.table.chain_rows) == (1600, 0)
    assert all(t.base is None for _, t in taken)
    assert len(decode_table(taken[-2][0].data, Count(), 100)) == 2  # the keys it changed, of 16
    assert len(decode_table(taken[-2][1].data, Count(), 100)) == 16

    reads = []

    def checkpoints(time_ms, crc, known):
        chain = store.recover(time_ms, crc, known)
        reads.append([stored.time_ms for stored in chain])
        return chain

    def totals(table):
        return dict(zip(*(part.tolist() for part in table.totals())))

    kept = KeptCheckpoint()
    for (_, twins), state, chain in zip(taken, states, chains):  # a worker serving the group batch after batch
        decoded = KeyGroup.decode(VectorizedCount(), 100, 0, state, checkpoints, kept)
        assert totals(decoded.table) == totals(decode_table(twins.data, Count(), 100))
        assert (decoded.table.whole_ms, decoded.table.chain_rows) == chain  # what its next checkpoint goes by
    assert reads == [[time_ms] for time_ms in range(100, 1700, 100)]  # one file each, rolled forward
    for index in (-2, 4):
        decoded = KeyGroup.decode(VectorizedCount(), 100, 0, states[index], checkpoints)
        assert (decoded.table.whole_ms, decoded.table.chain_rows) == chains[index]
    assert reads[-2:] == [list(range(600, 1600, 100)), [100, 200, 300, 400, 500]]
    with pytest.raises(CorruptCheckpointError, match="^key group checkpoint at 1500 ms: "):
        KeyGroup.recover(VectorizedCount(), 100, [*store.recover(1400), Stored(1500, 0, b"junk", (1400, 0))])
    restored = KeyGroup.recover(VectorizedCount(), 100, store.recover(1300))
    assert totals(restored.table) == totals(decode_table(taken[12][1].data, Count(), 100))
    assert restored.base == Base(1300, store.read(1300).crc)  # so its next checkpoint holds changes
    assert (restored.table.whole_ms, restored.table.chain_rows) == chains[12] == (600, 14)
    restored.apply(pd.DataFrame({"key": ["every"], "timestamp": [1350], "value": [1]}))
    assert restored.advance(1400)[1].base == restored.base


def test_a_chain_of_changes_never_crosses_a_multiple_of_whole_every_ms(tmp_path):
    store = CheckpointStore(LocalFileSystem(), str(tmp_path), "g")
    group, span = KeyGroup(VectorizedCount(), 100), whole_every_ms(100)
    assert span == 10_000
    for boundary in (span - 200, span - 100, span, span + 100):
        group.apply(pd.DataFrame({"key": ["a", "b", "c"], "timestamp": [boundary - 50] * 3, "value": [1] * 3}))
        _, checkpoint = group.advance(boundary)
        assert (checkpoint.base is None) is (boundary in (span - 200, span))
        group.checkpointed(Base(boundary, store.persist(*checkpoint).crc))


def test_a_state_that_follows_a_missing_checkpoint_is_an_error_saying_how_to_restart(tmp_path):
    store = CheckpointStore(LocalFileSystem(), str(tmp_path), "g")
    state = _following_state(store)
    (tmp_path / "g" / store.path(200).rsplit("/", 1)[1]).unlink()
    with pytest.raises(MissingCheckpointError, match="no checkpoint at 200 ms") as raised:
        KeyGroup.decode(VectorizedCount(), 100, 0, state, store.recover)
    assert "follows the checkpoint at 200 ms" in "\n".join(raised.value.__notes__)


def test_a_state_that_follows_a_checkpoint_written_again_with_other_bytes_is_a_corrupt_checkpoint_error(tmp_path):
    store = CheckpointStore(LocalFileSystem(), str(tmp_path), "g")
    state = _following_state(store)
    store.persist(200, b"other bytes")
    with pytest.raises(CorruptCheckpointError, match="holds another checkpoint than the one expected") as raised:
        KeyGroup.decode(VectorizedCount(), 100, 0, state, store.recover)
    assert "follows the checkpoint at 200 ms" in "\n".join(raised.value.__notes__)


def test_a_state_that_follows_a_checkpoint_cannot_be_decoded_without_the_checkpoints(tmp_path):
    state = _following_state(CheckpointStore(LocalFileSystem(), str(tmp_path), "g"))
    with pytest.raises(StateValueError,
                       match="follows its checkpoint at 200 ms: decoding it needs the group's checkpoints"):
        KeyGroup.decode(VectorizedCount(), 100, 0, state)


def test_a_group_whose_keys_expire_keeps_its_whole_state(tmp_path):
    """Expiry drops keys from the rows before the checkpoint too: those are not the checkpoint's."""
    store = CheckpointStore(LocalFileSystem(), str(tmp_path), "g")
    group = KeyGroup(ExpiringCount(50), 100)
    group.apply(pd.DataFrame({"key": ["a", "b"], "timestamp": [10, 90], "value": [1, 1]}))
    _, checkpoint = group.advance(110)
    group.checkpointed(Base(checkpoint[0], store.persist(*checkpoint).crc))
    assert group.table.keys.tolist() == ["b"]
    assert decode_record(group.encode(), "state")[0] == 0


def test_only_the_last_checkpoint_taken_can_be_followed():
    group, checkpoint = _counted_group_and_checkpoint()
    with pytest.raises(StateValueError, match="last checkpoint is at 200 ms"):
        group.checkpointed(Base(100, 0))
    assert group.base is None


class RunningSum(PersistentTask):
    """Sums the values per message and notes what each update and ``get`` returned."""

    def __init__(self):
        self.seen = []

    def persistent_state(self):
        return NonWindowState(Sum())

    def process_message(self, state, message):
        taken = state.update(message.timestamp, message.value)
        self.seen.append((message.key, taken, state.get()))


def test_a_per_message_task_sees_each_update_taken_and_its_keys_value_with_it():
    task = RunningSum()
    KeyGroup(task, 100).apply(pd.DataFrame({"key": ["a", "b", "a"], "timestamp": [10, 20, 30], "value": [1, 2, 4]}))
    assert task.seen == [("a", True, 1), ("b", True, 2), ("a", True, 5)]


class PerMessageLast(PersistentTask):
    def persistent_state(self):
        return NonWindowState(Last())

    def process_message(self, state, message):
        state.update(message.timestamp, Timestamped(message.timestamp, message.value))


def test_a_per_message_update_folds_the_value_given_whatever_the_monoid_takes_for_zero():
    group = KeyGroup(PerMessageLast(), 100)
    group.apply(pd.DataFrame({"key": ["a", "a"], "timestamp": [10, 20], "value": ["x", "y"]}))
    assert group.table.get("a") == Timestamped(20, "y")  # Last's zero is None, which it also takes


def test_a_group_restored_from_a_checkpoint_of_another_time_is_refused():
    _, (time_ms, data, _) = _counted_group_and_checkpoint()
    with pytest.raises(CorruptCheckpointError, match=f"checkpoint at 300 holds the state at {time_ms}"):
        KeyGroup.restore(VectorizedCount(), 100, 300, data)


def _empty_checkpoint_at(time_ms: int) -> bytes:
    return KeyGroup(VectorizedCount(), 100).advance(time_ms)[1].data


@pytest.mark.parametrize("made", [
    lambda: KeyGroup.decode(VectorizedCount(), 100, 300, _counted_group().encode()),
    lambda: KeyGroup.restore(VectorizedCount(), 100, 300, _empty_checkpoint_at(300)),
    lambda: KeyGroup.recover(VectorizedCount(), 100, [Stored(300, 0, _empty_checkpoint_at(300))]),
], ids=["decoded", "restored", "recovered"])
def test_a_group_drops_the_messages_before_its_restore_point_as_replayed(made):
    group = made()
    applied = group.apply(pd.DataFrame({"key": ["a", "b", "c"], "timestamp": [0, 250, 300], "value": [1, 1, 1]}))
    assert (applied.replayed, applied.applied, applied.late_count) == (2, 1, 0)
    assert group.apply(pd.DataFrame({"key": ["a"], "timestamp": [299], "value": [1]})).replayed == 1


def test_a_group_started_at_a_restore_point_takes_no_checkpoint_there():
    assert KeyGroup(VectorizedCount(), 100, floor_ms=300).advance(300)[1] is None


def test_a_message_at_time_0_is_applied():
    group = KeyGroup(VectorizedCount(), 100)
    assert group.apply(pd.DataFrame({"key": ["a"], "timestamp": [0], "value": [1]})).applied == 1


class Columns(VectorizedCount):
    """Counts, and notes the columns of each batch it gets."""

    def __init__(self):
        self.seen = []

    def process_batch(self, messages):
        self.seen.append(messages.columns.tolist())
        return super().process_batch(messages)


def test_a_task_gets_the_message_columns_only():
    task = Columns()
    KeyGroup(task, 100).apply(pd.DataFrame({"key": ["a"], "timestamp": [1], "value": [1], "part": [0]}))
    assert task.seen == [["key", "timestamp", "value"]]


def test_the_late_updates_of_a_batch_are_its_own():
    tester = TaskTester(BackdatedCount(), checkpoint_interval_ms=100)
    tester.advance_watermark(100)  # checkpoint at 100
    for _ in range(2):
        assert tester.group.apply(pd.DataFrame({"key": ["a"], "timestamp": [120], "value": [80]})).late_updates == 1


def test_a_damaged_state_says_to_restart_from_the_clock():
    state = bytearray(_counted_group().encode())
    state[-1] ^= 1
    with pytest.raises(CorruptCheckpointError, match=r"delete DIR/spark/ to restart the job from the clock \(path B\)"):
        KeyGroup.decode(VectorizedCount(), 100, 0, bytes(state))


@pytest.mark.parametrize("state, problem", [
    (encode_record(0, b"\x00" * 7), "7 bytes are too short for its size"),
    (encode_record(0, struct.pack(">Q", 100)), "zstd bytes do not decompress"),
    (encode_record(200, b"\x00" * 11), "11 bytes are too short for its size"),
    (struct.pack(">4sQ", b"PKGZ", 100), "12 bytes are too short for its frame"),
    (struct.pack(">4sQI", b"PKGZ", 100, 0), "zstd bytes do not decompress"),
])
def test_a_state_too_short_for_its_frame_or_with_nothing_to_decompress_is_corrupt(state, problem):
    with pytest.raises(CorruptCheckpointError, match=f"key group state: .*{problem}"):
        KeyGroup.decode(VectorizedCount(), 100, 0, state)


def test_a_state_that_follows_a_checkpoint_reads_the_checkpoint_of_its_time(tmp_path):
    store = CheckpointStore(LocalFileSystem(), str(tmp_path), "g")
    state = _following_state(store)
    earlier = KeyGroup(VectorizedCount(), 100).advance(100)[1][1]
    with pytest.raises(CorruptCheckpointError, match="checkpoint at 200 holds the state at 100"):
        KeyGroup.decode(VectorizedCount(), 100, 0, state, lambda time_ms, crc, known: [Stored(time_ms, crc, earlier)])


@pytest.mark.parametrize("kept", [None, KeptCheckpoint()], ids=["read", "kept"])
def test_a_damaged_checkpoint_a_state_follows_is_named_as_the_key_group_checkpoint_of_its_time(tmp_path, kept):
    store = CheckpointStore(LocalFileSystem(), str(tmp_path), "g")
    state = _following_state(store)
    with pytest.raises(CorruptCheckpointError, match="^key group checkpoint at 200 ms: "):
        KeyGroup.decode(VectorizedCount(), 100, 0, state, lambda time_ms, crc, known: [Stored(time_ms, crc, b"junk")],
                        kept)


def test_damaged_rows_since_a_checkpoint_are_named_as_the_key_group_state(tmp_path):
    store = CheckpointStore(LocalFileSystem(), str(tmp_path), "g")
    _following_state(store)
    junk = pa.compress(b"not a table", codec="zstd", asbytes=True)
    state = encode_record(200, struct.pack(">IQ", 0, len(b"not a table")) + junk)
    with pytest.raises(CorruptCheckpointError, match="^key group state: "):
        KeyGroup.decode(VectorizedCount(), 100, 0, state, lambda time_ms, crc, known: store.recover(time_ms))
