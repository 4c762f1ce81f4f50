"""``CheckpointStore`` and the record format: round trips, listing, retention, and every kind of damage."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from persistent.storage.checkpoint_store import (
    FORMAT_VERSION,
    MAGIC,
    CheckpointStore,
    Stored,
    check_time_ms,
    decode_record,
    describe_times,
    encode_record,
)
from persistent.storage.fs import TEMP_PREFIX, FileSystem, LocalFileSystem
from state.errors import CorruptCheckpointError, MissingCheckpointError, StateTypeError, StateValueError

TASK = "group-0007"


class MemoryFileSystem(FileSystem):
    """Files in a dict: proves the store needs nothing beyond the ``FileSystem`` interface."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def read_bytes(self, path: str) -> bytes:
        try:
            return self.files[path]
        except KeyError:
            raise FileNotFoundError(path) from None

    def write_atomic(self, path: str, data: bytes) -> None:
        self.files[path] = bytes(data)

    def create_new(self, path: str, data: bytes) -> None:
        if path in self.files:
            raise FileExistsError(path)
        self.files[path] = bytes(data)

    def replace(self, source: str, target: str) -> None:
        self.files[target] = self.files.pop(source)

    def exists(self, path: str) -> bool:
        return path in self.files or any(p.startswith(path + "/") for p in self.files)

    def list_names(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix) :].split("/")[0] for p in self.files if p.startswith(prefix)})

    def delete(self, path: str) -> None:
        for p in [p for p in self.files if p == path or p.startswith(path + "/")]:
            del self.files[p]

    def mkdirs(self, path: str) -> None:
        pass


@pytest.fixture(params=["local", "memory"])
def fs(request: pytest.FixtureRequest) -> FileSystem:
    return LocalFileSystem() if request.param == "local" else MemoryFileSystem()


@pytest.fixture
def store(fs: FileSystem, tmp_path) -> CheckpointStore:
    return CheckpointStore(fs, str(tmp_path / "checkpoints"), TASK)


def tamper(store: CheckpointStore, timestamp_ms: int, change) -> str:
    """Replaces the checkpoint file at ``timestamp_ms`` by ``change(old bytes)``; returns its path."""
    path = store.path(timestamp_ms)
    store.fs.write_atomic(path, change(store.fs.read_bytes(path)))
    return path


def test_persisted_checkpoint_recovers_the_same_bytes(store: CheckpointStore) -> None:
    payloads = {0: b"", 10: b"\x00state\xff", 1_700_000_000_000: bytes(range(256)) * 40}
    for timestamp_ms, data in payloads.items():
        store.persist(timestamp_ms, data)
    reopened = CheckpointStore(store.fs, store.directory.rsplit("/", 1)[0], TASK)
    assert {t: reopened.read(t).data for t in payloads} == payloads


def test_file_names_encode_the_zero_padded_time(store: CheckpointStore) -> None:
    store.persist(1_700_000_000_000, b"x")
    assert store.fs.list_names(store.directory) == ["0000000001700000000000.ckpt"]


def test_times_are_sorted_by_time_whatever_the_order_of_writing(store: CheckpointStore) -> None:
    for timestamp_ms in (100, 5, 2_000, 20):
        store.persist(timestamp_ms, b"x")
    assert store.times() == [5, 20, 100, 2_000]
    assert store.latest() == 2_000


def test_a_task_without_checkpoints_has_no_times_and_no_latest(store: CheckpointStore) -> None:
    assert store.times() == []
    assert store.latest() is None


def test_persisting_the_same_time_again_overwrites(store: CheckpointStore) -> None:
    store.persist(10, b"first attempt")
    store.persist(10, b"replay")
    assert store.times() == [10]
    assert store.read(10).data == b"replay"


def test_a_checkpoint_is_recovered_by_the_crc32_persist_wrote_it_with_and_no_other(store: CheckpointStore) -> None:
    written = store.persist(10, b"first attempt!")
    raw = store.fs.read_bytes(store.path(10))
    # The file's size, and the unsigned CRC32 of its header (this one has its high bit set).
    assert written == (len(raw), struct.unpack_from(">I", raw, 22)[0]) and written.crc >= 2**31
    assert store.read(10, written.crc).data == b"first attempt!"
    store.persist(10, b"written again")
    with pytest.raises(CorruptCheckpointError, match=f"holds another checkpoint .* not {written.crc}") as raised:
        store.recover(10, written.crc)
    assert raised.value.path == store.path(10)


def test_temp_files_of_unfinished_writes_and_unrelated_names_are_ignored(store: CheckpointStore) -> None:
    store.persist(10, b"x")
    name = store.path(20).rsplit("/", 1)[1]
    unfinished = encode_record(20, b"half written")[:9]
    store.fs.write_atomic(store.fs.join(store.directory, f"{TEMP_PREFIX}crash-{name}"), unfinished)
    store.fs.write_atomic(store.fs.join(store.directory, "notes.txt"), b"")
    store.fs.write_atomic(store.fs.join(store.directory, "20.ckpt"), b"")
    assert store.times() == [10]


def test_retain_deletes_older_checkpoints_and_keeps_the_rest(store: CheckpointStore) -> None:
    for timestamp_ms in (10, 20, 30, 40):
        store.persist(timestamp_ms, b"x")
    store.retain(30)
    assert store.times() == [30, 40]


def test_retain_always_keeps_the_newest_checkpoint(store: CheckpointStore) -> None:
    for timestamp_ms in (10, 20, 30):
        store.persist(timestamp_ms, b"x")
    store.retain(1_000)
    assert store.times() == [30]


def _chain(store: CheckpointStore, times: list[int]) -> list[Stored]:
    """Checkpoints at ``times``: the first whole, each later one the changes to the one before."""
    base = None
    for timestamp_ms in times:
        written = store.persist(timestamp_ms, f"at {timestamp_ms}".encode(), base)
        base = (timestamp_ms, written.crc)
    return [store.read(timestamp_ms) for timestamp_ms in times]


def test_a_checkpoint_of_changes_is_recovered_with_its_chain_from_the_whole_one(store: CheckpointStore) -> None:
    assert [s.base for s in _chain(store, [0, 5])] == [None, (0, store.read(0).crc)]  # a base at time 0
    assert [s.time_ms for s in store.recover(5)] == [0, 5]
    stored = _chain(store, [10, 20, 30])
    assert all(type(s.data) is bytes for s in stored)
    assert [(s.data, s.base) for s in stored] == [
        (b"at 10", None), (b"at 20", (10, stored[0].crc)), (b"at 30", (20, stored[1].crc))]
    assert store.recover(30) == stored
    assert store.recover(20, stored[1].crc) == stored[:2]
    assert store.recover(30, known=(10, stored[0].crc)) == stored[1:]  # the changes after the one held
    assert store.recover(30, known=(10, stored[0].crc + 1)) == stored  # another checkpoint at 10: read all
    assert store.recover(10, known=(10, stored[0].crc)) == stored[:1]


def test_a_chain_with_a_link_written_again_or_missing_is_refused(store: CheckpointStore) -> None:
    _chain(store, [10, 20, 30])
    store.persist(20, b"written again")
    with pytest.raises(CorruptCheckpointError, match="holds another checkpoint than the one expected") as raised:
        store.recover(30)
    assert "The checkpoint at 30 ms holds the changes to the one at 20 ms." in raised.value.__notes__
    store.delete_after(10)
    _chain(store, [20, 30, 40])
    store.fs.delete(store.path(20))
    with pytest.raises(MissingCheckpointError, match="no checkpoint at 20 ms"):
        store.recover(40)


def test_changes_must_follow_an_earlier_checkpoint_and_be_of_a_known_frame(store: CheckpointStore) -> None:
    with pytest.raises(StateValueError, match="cannot change a later one"):
        store.persist(20, b"x", (20, 0))
    with pytest.raises(StateValueError, match="^base time must be in"):
        store.persist(20, b"x", (-1, 0))
    for payload, problem in [
        (struct.pack(">4sHqI", b"PCHG", 9, 10, 0) + b"x", "changes of format 9 on a checkpoint at 10 ms"),
        (struct.pack(">4sHqI", b"PCHG", 1, 30, 0) + b"x", "changes of format 1 on a checkpoint at 30 ms"),  # itself
        (b"PCHG\x00", "its changes frame is torn"),
        (struct.pack(">4sHqI", b"PCHG", 1, 10, 0), "its changes frame is torn"),  # a frame without data
    ]:
        store.fs.write_atomic(store.path(30), encode_record(30, payload))
        with pytest.raises(CorruptCheckpointError, match=problem) as raised:
            store.read(30)
        assert raised.value.path == store.path(30)


def test_retain_keeps_the_chains_of_the_checkpoints_it_keeps(store: CheckpointStore) -> None:
    _chain(store, [10, 20])
    _chain(store, [40, 50, 60])  # a whole one at 40, the first multiple of 40
    store.retain(55, whole_every_ms=40)
    assert store.times() == [40, 50, 60]
    store.retain(1_000, whole_every_ms=40)  # only the newest is kept, with its chain
    assert store.times() == [40, 50, 60]
    assert [s.time_ms for s in store.recover(60)] == [40, 50, 60]
    store.retain(60)  # without a promise, as before: what is older goes
    assert store.times() == [60]


def test_retain_keeps_the_chain_the_writer_recorded_for_the_oldest_checkpoint_it_keeps(store: CheckpointStore) -> None:
    _chain(store, [10, 20, 30])
    _chain(store, [40, 50, 60, 70])
    store.retain(45, whole_every_ms=1_000, wholes={50: 40, 60: 40, 70: 40})
    assert store.times() == [40, 50, 60, 70]  # 50's chain, though 0 is the last multiple of 1,000
    store.retain(65, whole_every_ms=1_000, wholes={70: 40})
    assert store.times() == [40, 50, 60, 70]
    assert [s.time_ms for s in store.recover(70)] == [40, 50, 60, 70]
    store.retain(65, whole_every_ms=40, wholes={50: 40})  # 70 not recorded: the promise keeps from 40
    assert store.times() == [40, 50, 60, 70]


def test_a_checkpoints_data_is_stored_compressed_and_read_back_as_written(store: CheckpointStore) -> None:
    data = b"".join(f"key-{i % 500:05d}".encode() for i in range(20_000))
    written = store.persist(10, data)
    changes = store.persist(20, data[:1000], (10, written.crc))
    assert written.size < len(data) / 10 and changes.size < 1000
    assert store.read(10).data == data and store.read(20).data == data[:1000]
    store.fs.write_atomic(store.path(30), encode_record(30, b"earlier, uncompressed"))
    assert store.read(30).data == b"earlier, uncompressed"


def test_compressed_data_that_does_not_decompress_is_corrupt(store: CheckpointStore) -> None:
    for payload, problem in [
        (struct.pack(">4sHQ", b"PZST", 1, 99) + b"not zstd", "its zstd data do not decompress"),
        (struct.pack(">4sHQ", b"PZST", 2, 99) + b"zstd?", "compressed data of format 2"),
        (b"PZST\x00\x01", "its compressed frame is torn"),
        (struct.pack(">4sHQ", b"PZST", 1, 0), "its compressed frame is torn"),  # zstd writes bytes even for none
        (struct.pack(">4sHqI", b"PCHG", 1, 5, 0) + b"PZST", "its compressed frame is torn"),
    ]:
        store.fs.write_atomic(store.path(10), encode_record(10, payload))
        with pytest.raises(CorruptCheckpointError, match=problem) as raised:
            store.read(10)
        assert raised.value.path == store.path(10)


def test_delete_after_drops_checkpoints_newer_than_the_rewind_point(store: CheckpointStore) -> None:
    for timestamp_ms in (10, 20, 30, 40):
        store.persist(timestamp_ms, b"x")
    store.delete_after(20)
    assert store.times() == [10, 20]


@pytest.mark.parametrize("keep_bytes", [0, 1, 25, 30])
def test_torn_record_raises_instead_of_returning_empty_state(store: CheckpointStore, keep_bytes: int) -> None:
    store.persist(10, b"some state of many bytes")
    path = tamper(store, 10, lambda raw: raw[:keep_bytes])
    with pytest.raises(CorruptCheckpointError, match="torn") as caught:
        store.recover(10)
    assert path in str(caught.value) and caught.value.path == path


def test_trailing_bytes_after_the_payload_are_corruption(store: CheckpointStore) -> None:
    store.persist(10, b"state")
    path = tamper(store, 10, lambda raw: raw + b"\x00")
    with pytest.raises(CorruptCheckpointError, match="payload bytes") as caught:
        store.recover(10)
    assert path in str(caught.value)


def test_any_flipped_byte_is_detected(store: CheckpointStore) -> None:
    store.persist(10, b"state")
    original = store.fs.read_bytes(store.path(10))
    for offset in range(len(original)):
        flipped = bytearray(original)
        flipped[offset] ^= 0x01
        store.fs.write_atomic(store.path(10), bytes(flipped))
        with pytest.raises(CorruptCheckpointError) as caught:
            store.recover(10)
        assert store.path(10) in str(caught.value), offset


def test_flipped_payload_byte_fails_the_checksum(store: CheckpointStore) -> None:
    store.persist(10, b"state")
    tamper(store, 10, lambda raw: raw[:-1] + bytes([raw[-1] ^ 0x80]))
    with pytest.raises(CorruptCheckpointError, match=r"checksum mismatch \(bytes changed after writing\); "):
        store.recover(10)


def test_the_checksum_covers_the_header_too() -> None:
    record = bytearray(encode_record(10, b"state"))
    record[13] ^= 0x01  # the time: 10 ms becomes 11
    with pytest.raises(CorruptCheckpointError, match="checksum mismatch"):
        decode_record(bytes(record), "the record")


def test_wrong_magic_raises(store: CheckpointStore) -> None:
    store.persist(10, b"state")
    path = tamper(store, 10, lambda raw: b"JUNK" + raw[len(MAGIC) :])
    with pytest.raises(CorruptCheckpointError, match="magic") as caught:
        store.recover(10)
    assert path in str(caught.value)


def test_other_format_version_raises(store: CheckpointStore) -> None:
    store.persist(10, b"state")
    other = struct.pack(">H", FORMAT_VERSION + 1)
    path = tamper(store, 10, lambda raw: raw[:4] + other + raw[6:])
    with pytest.raises(CorruptCheckpointError, match=f"format version {FORMAT_VERSION + 1}") as caught:
        store.recover(10)
    assert path in str(caught.value)


def test_header_time_differing_from_the_file_name_is_corruption(store: CheckpointStore) -> None:
    store.persist(10, b"state of 10")
    store.fs.write_atomic(store.path(20), store.fs.read_bytes(store.path(10)))
    with pytest.raises(CorruptCheckpointError, match="header says 10 ms, file name says 20 ms") as caught:
        store.recover(20)
    assert store.path(20) in str(caught.value) and caught.value.path == store.path(20)


@pytest.mark.parametrize("look", [CheckpointStore.recover, CheckpointStore.require])
def test_missing_checkpoint_raises_naming_path_time_and_what_is_held(store: CheckpointStore, look) -> None:
    store.persist(10, b"x")
    with pytest.raises(MissingCheckpointError) as caught:
        look(store, 20)
    assert (caught.value.task, caught.value.timestamp_ms) == (TASK, 20)
    message = str(caught.value)
    assert store.path(20) in message and "no checkpoint at 20 ms" in message and "held: 10 ms" in message
    assert "rewind" in message


def test_a_time_to_retain_from_that_is_no_time_is_refused_naming_it(store: CheckpointStore) -> None:
    with pytest.raises(StateValueError, match="oldest_ms must be"):
        store.retain(-1)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10", None, 2**63])
def test_negative_or_non_int_timestamps_are_refused(store: CheckpointStore, bad: object) -> None:
    with pytest.raises(StateValueError, match="^timestamp_ms must be "):
        store.persist(bad, b"x")  # type: ignore[arg-type]
    with pytest.raises(StateValueError):
        store.recover(bad)  # type: ignore[arg-type]


def test_non_bytes_data_is_refused(store: CheckpointStore) -> None:
    with pytest.raises(StateTypeError, match="checkpoint data must be bytes, got int"):
        store.persist(10, 3)  # type: ignore[arg-type]


@pytest.mark.parametrize("task", ["", ".", "..", "a/b", "a\\b"])
def test_task_names_that_are_not_one_directory_name_are_refused(fs: FileSystem, task: str) -> None:
    with pytest.raises(StateValueError, match="task name"):
        CheckpointStore(fs, "/unused", task)


def test_record_helpers_round_trip_and_name_the_source_when_corrupt() -> None:
    raw = encode_record(42, b"payload")
    assert raw.startswith(MAGIC)
    assert decode_record(raw, "somewhere") == (42, b"payload")
    assert decode_record(encode_record(7, b""), "somewhere") == (7, b"")  # a header alone holds no data
    with pytest.raises(CorruptCheckpointError, match="corrupt record somewhere: .*; do this") as caught:
        decode_record(raw[:-1], "somewhere", "do this")
    assert isinstance(caught.value, OSError)


def test_numpy_integer_times_are_accepted_as_ints(store: CheckpointStore) -> None:
    store.persist(np.int64(10), b"x")
    assert store.times() == [10] and store.read(np.int64(10)).data == b"x"
    for edge in (0, 2**63 - 1):
        assert check_time_ms(np.int64(edge)) == check_time_ms(edge) == edge


def test_a_time_that_is_no_int_is_refused_naming_its_type() -> None:
    with pytest.raises(StateValueError, match="^timestamp_ms must be an int of milliseconds, got str '10'$"):
        check_time_ms("10")


def test_a_write_and_a_replace_make_the_file_and_its_directory_entry_durable(tmp_path, fsyncs) -> None:
    fs = LocalFileSystem()
    fs.write_atomic(str(tmp_path / "a" / "clock"), b"one")
    assert fsyncs[-1] == str(tmp_path / "a") and fsyncs[-2].startswith(str(tmp_path / "a" / TEMP_PREFIX))
    fs.replace(str(tmp_path / "a" / "clock"), str(tmp_path / "b" / "clock"))
    assert fsyncs[-1] == str(tmp_path / "b")


def test_messages_name_a_few_checkpoint_times_each_and_many_by_their_range() -> None:
    assert describe_times([]) == "none"
    assert describe_times([100, 200, 300, 400, 500]) == "100, 200, 300, 400, 500 ms"
    assert describe_times([100, 200, 300, 400, 500, 600]) == "6 checkpoints from 100 to 600 ms"
