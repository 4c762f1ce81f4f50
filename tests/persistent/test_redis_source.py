"""The Redis Streams reader against a real Redis server on loopback (``redis_url`` in
tests/conftest.py), driven the way Spark drives it: offsets, partitions, read."""

from __future__ import annotations

import json

import pytest
import redis
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from persistent.core.errors import ConfigError, InputError
from persistent.sources import redis as redis_source
from persistent.sources.redis import RedisSource, _RedisReader


@pytest.fixture
def client(redis_url):
    with redis.Redis.from_url(redis_url, decode_responses=True) as c:
        yield c


def reader(url, streams=("events",), start_ms=0, **options) -> _RedisReader:
    return _RedisReader(RedisSource(url, streams, **options).options(start_ms))


def add(client, stream, entries):
    """Adds (id, key, value) entries."""
    for entry_id, key, value in entries:
        client.xadd(stream, {"key": key, "value": value}, id=entry_id)


def read(r: _RedisReader, start: dict, end: dict) -> list[tuple]:
    """The messages of one micro-batch (read as Arrow batches)."""
    return [
        tuple(row.values())
        for partition in r.partitions(start, end)
        for batch in r.read(partition)
        for row in batch.to_pylist()
    ]


def batches(r: _RedisReader, limit) -> list[list[tuple]]:
    """Plans and reads micro-batches until one brings nothing new."""
    out, start = [], r.initialOffset()
    while True:
        end = r.latestOffset(start, limit)
        if end == start:
            return out
        out.append(read(r, start, end))
        start = end


def test_bounded_batches_read_every_entry_once_in_order(client, redis_url, monkeypatch):
    monkeypatch.setattr(redis_source, "_PAGE", 3)  # a batch reads several pages
    entries = [(f"{ms}-{seq}", f"k{ms % 3}", f"v{ms}.{seq}") for ms in range(1, 8) for seq in range(2)]
    add(client, "events", entries)
    got = batches(reader(redis_url, max_entries_per_batch=4), ReadMaxRows(4))
    assert [len(b) for b in got] == [4, 4, 4, 2]
    assert [m for b in got for m in b] == [(key, int(i.split("-")[0]), value) for i, key, value in entries]


def test_entries_of_one_millisecond_split_across_batches(client, redis_url):
    add(client, "events", [(f"100-{seq}", "k", str(seq)) for seq in range(5)])
    got = batches(reader(redis_url), ReadMaxRows(2))
    assert [[value for _, _, value in b] for b in got] == [["0", "1"], ["2", "3"], ["4"]]
    assert {ms for b in got for _, ms, _ in b} == {100}


def test_batches_take_the_earliest_entries_across_streams(client, redis_url):
    add(client, "a", [("1-0", "x", "a1"), ("2-0", "x", "a2"), ("9-0", "x", "a9")])
    add(client, "b", [("3-0", "y", "b3"), ("4-0", "y", "b4"), ("5-0", "y", "b5")])
    r = reader(redis_url, ("b", "a"))
    got = batches(r, ReadMaxRows(2))
    assert [sorted(v for _, _, v in b) for b in got] == [["a1", "a2"], ["b3", "b4"], ["a9", "b5"]]
    # Offsets are JSON with a stable key order, as Spark's offset log needs.
    assert list(r.initialOffset()) == ["a", "b"]
    assert json.loads(json.dumps(r.initialOffset())) == {"a": "0-0", "b": "0-0"}


def test_rewinding_to_a_time_starts_at_its_first_entry(client, redis_url):
    add(client, "events", [("99-0", "k", "before"), ("99-7", "k", "before"), ("100-0", "k", "at"), ("100-1", "k", "at"),
                           ("101-0", "k", "after")])
    r = reader(redis_url, start_ms=100)
    assert r.initialOffset() == {"events": "100-0"}
    assert [m for b in batches(r, ReadAllAvailable()) for m in b] == [
        ("k", 100, "at"), ("k", 100, "at"), ("k", 101, "after")
    ]


def test_a_planned_batch_reads_the_same_messages_after_more_arrive(client, redis_url):
    add(client, "events", [(f"{ms}-0", "k", str(ms)) for ms in range(1, 6)])
    r = reader(redis_url)
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    first = read(r, start, end)
    add(client, "events", [(f"{ms}-0", "k", str(ms)) for ms in range(6, 9)])
    assert read(reader(redis_url), start, end) == first  # Spark's replay of the batch
    assert [v for _, _, v in read(r, end, r.latestOffset(end, ReadAllAvailable()))] == ["6", "7", "8"]


def test_available_now_stops_at_what_was_there_when_it_began(client, redis_url):
    add(client, "events", [(f"{ms}-0", "k", str(ms)) for ms in range(1, 6)])
    r = reader(redis_url, ("events", "later"))
    r.prepareForTriggerAvailableNow()
    add(client, "events", [("6-0", "k", "6")])
    add(client, "later", [("7-0", "k", "7")])
    assert [v for b in batches(r, ReadMaxRows(2)) for _, _, v in b] == ["1", "2", "3", "4", "5"]
    assert [v for b in batches(r, ReadAllAvailable()) for _, _, v in b] == ["1", "2", "3", "4", "5"]


def test_missing_streams_give_empty_batches(redis_url):
    r = reader(redis_url, ("nothing",))
    start = r.initialOffset()
    assert r.latestOffset(start, ReadMaxRows(10)) == start
    assert r.latestOffset(start, ReadAllAvailable()) == start
    assert r.partitions(start, start) == []


def test_field_names_are_configurable(client, redis_url):
    client.xadd("events", {"user": "alice", "payload": "{}", "other": "x"}, id="5-0")
    r = reader(redis_url, key_field="user", value_field="payload")
    assert batches(r, ReadAllAvailable()) == [[("alice", 5, "{}")]]


def test_an_entry_without_the_value_field_is_an_error_naming_it(client, redis_url):
    client.xadd("events", {"key": "k", "val": "1"}, id="5-3")
    with pytest.raises(InputError, match=r"entry 5-3 of stream 'events' has no field 'value' \(its fields: key, val\)"):
        batches(reader(redis_url), ReadAllAvailable())


def test_entries_deleted_from_a_planned_batch_fail_it(client, redis_url):
    add(client, "events", [(f"{ms}-0", "k", str(ms)) for ms in range(1, 6)])
    r = reader(redis_url)
    start = r.initialOffset()
    end = r.latestOffset(start, ReadMaxRows(3))
    client.xdel("events", "2-0")
    with pytest.raises(InputError, match=r"range \[0-0, 3-1\) were deleted \(up to 2-0\)"):
        read(r, start, end)
    # Entries before a batch's range may go (they are before the clock).
    assert [v for _, _, v in read(r, end, r.latestOffset(end, ReadAllAvailable()))] == ["4", "5"]


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"streams": ()}, "streams must be distinct stream names"),
        ({"streams": ("a", "a")}, "streams must be distinct stream names"),
        ({"streams": "a", "max_entries_per_batch": 0}, "max_entries_per_batch must be > 0"),
    ],
)
def test_invalid_settings_are_refused(arguments, message):
    with pytest.raises(ConfigError, match=message):
        RedisSource("redis://localhost", **arguments)


def test_a_single_stream_name_is_accepted():
    source = RedisSource("redis://localhost:6379/0", "events")
    assert source.streams == ("events",)
    assert json.loads(source.options(42)["streams"]) == ["events"]
    assert source.options(42)["start_ms"] == "42"
