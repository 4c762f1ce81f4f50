"""A time-replayable source of Redis Streams (``pip install persistent-state[redis]``).

A stream entry's id is ``<ms>-<seq>``, and that ``ms`` is the message's event time:
Redis gives new entries the current time, and a producer that knows the event time
sets the id itself (``XADD events 1700000000123-* key k value v``; ids must grow).
So rewinding to clock ``T`` is ``XRANGE events T-0 +``, and an offset is, per stream,
the id where the next micro-batch starts. A micro-batch reads the half-open id
range ``[start, end)`` of every stream; entries never change inside a range that is
already planned, so a replayed batch reads the same messages.

Each entry becomes a message: ``key`` and ``value`` from two of its fields (``key``
and ``value`` by default) and ``timestamp`` from its id.

Remove only entries before the job's clock (``persistent clock DIR``), e.g.
``XTRIM events MINID <clock>``: a rewind reads from the clock on. A micro-batch
whose range lost entries to ``XDEL`` fails instead of counting fewer messages;
trimmed entries leave no such trace in Redis.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from persistent.core.errors import ConfigError, InputError
from persistent.core.task import MESSAGE_COLUMNS
from persistent.sources.base import Source
from persistent.sources.bounds import BoundedReader

__all__ = ["RedisSource"]

#: Entries per XRANGE call (and Arrow batch) when reading a micro-batch.
_PAGE = 10_000
_MAX_SEQ = 2**64 - 1


@dataclass(frozen=True)
class RedisSource(Source):
    """Messages from the Redis streams ``streams`` at ``url`` (``redis://host:port/db``);
    see the module docstring. ``max_entries_per_batch`` bounds a micro-batch: it takes
    the earliest entries across all streams."""

    url: str
    streams: tuple[str, ...]
    key_field: str = "key"
    value_field: str = "value"
    max_entries_per_batch: int = 10_000
    key_type = "string"
    value_type = "string"
    format = "persistent_redis"

    def __post_init__(self):
        streams = (self.streams,) if isinstance(self.streams, str) else tuple(self.streams)
        if not streams or len(set(streams)) != len(streams):
            raise ConfigError(f"redis source: streams must be distinct stream names, got {self.streams!r}")
        object.__setattr__(self, "streams", streams)
        if self.max_entries_per_batch <= 0:
            raise ConfigError(f"redis source: max_entries_per_batch must be > 0, got {self.max_entries_per_batch}")

    def options(self, start_ms: int) -> dict[str, str]:
        return {
            "url": self.url,
            "streams": json.dumps(sorted(self.streams)),
            "key_field": self.key_field,
            "value_field": self.value_field,
            "max_entries_per_batch": str(self.max_entries_per_batch),
            "start_ms": str(start_ms),
        }

    @staticmethod
    def reader(options: dict[str, str]) -> DataSourceStreamReader:
        return _RedisReader(options)


def _parse(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq)


def _after(entry_id: str) -> str:
    """The smallest id greater than ``entry_id``."""
    ms, seq = _parse(entry_id)
    return f"{ms}-{seq + 1}" if seq < _MAX_SEQ else f"{ms + 1}-0"


def _client(url: str):
    import redis

    return redis.Redis.from_url(url, decode_responses=True)


@dataclass(frozen=True)
class _StreamRange(InputPartition):
    stream: str
    start: str
    end: str


class _RedisReader(BoundedReader):
    """Offsets map each stream to the id its next micro-batch starts at."""

    def __init__(self, options: dict[str, str]):
        super().__init__(options)
        self.url = options["url"]
        self.streams = json.loads(options["streams"])
        self.key_field, self.value_field = options["key_field"], options["value_field"]
        self.max_entries = int(options["max_entries_per_batch"])
        # Ids start with their time: rewinding to start_ms is starting at id start_ms-0.
        self.first = f"{int(options.get('start_ms', '0'))}-0"
        self.target: dict[str, str] | None = None

    def initialOffset(self) -> dict:
        return {stream: self.first for stream in self.streams}

    def _starts(self, start: dict) -> dict[str, str]:
        # A stream added to the job since the offset was logged starts at the beginning.
        return {stream: start.get(stream, self.first) for stream in self.streams}

    def _ends(self) -> dict[str, str]:
        """Per stream, the id after its newest entry (its start offset when empty)."""
        with _client(self.url) as client:
            newest = {stream: client.xrevrange(stream, "+", "-", count=1) for stream in self.streams}
        return {stream: _after(entries[0][0]) if entries else self.first for stream, entries in newest.items()}

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._ends()

    def most(self) -> int:
        return self.max_entries

    def end(self, start: dict, most: int | None) -> dict:
        starts = self._starts(start)
        if most is None:
            ends = self._ends() if self.target is None else self.target
            return {s: max(starts[s], ends[s], key=_parse) for s in self.streams}
        # The earliest ``most`` entries across all streams, so event time advances evenly.
        candidates = []
        with _client(self.url) as client:
            for stream in self.streams:
                if self.target is None:
                    ids = client.xrange(stream, starts[stream], "+", count=most)
                elif _parse(self.target[stream]) > _parse(starts[stream]):
                    ids = client.xrange(stream, starts[stream], "(" + self.target[stream], count=most)
                else:
                    ids = []
                candidates.extend((_parse(entry_id), stream) for entry_id, _ in ids)
        ends = dict(starts)
        for (ms, seq), stream in heapq.nsmallest(most, candidates):
            ends[stream] = _after(f"{ms}-{seq}")  # ascending: the stream's last one wins
        return ends

    def ranges(self, start: dict, end: dict):
        starts = self._starts(start)
        return [
            _StreamRange(stream, starts[stream], end[stream])
            for stream in self.streams
            if _parse(end[stream]) > _parse(starts[stream])
        ]

    def read(self, partition: _StreamRange):
        import pyarrow as pa

        stream, cursor, bound = partition.stream, partition.start, "(" + partition.end
        with _client(self.url) as client:
            while True:
                entries = client.xrange(stream, cursor, bound, count=_PAGE)
                if entries:
                    keys, times, values = zip(*(self._message(stream, i, fields) for i, fields in entries))
                    columns = [pa.array(keys, pa.string()), pa.array(times, pa.int64()), pa.array(values, pa.string())]
                    yield pa.RecordBatch.from_arrays(columns, names=MESSAGE_COLUMNS)
                if len(entries) < _PAGE:
                    break
                cursor = "(" + entries[-1][0]
            self._check_intact(client, partition)

    def _message(self, stream: str, entry_id: str, fields: dict) -> tuple:
        try:
            return fields[self.key_field], _parse(entry_id)[0], fields[self.value_field]
        except KeyError as missing:
            raise InputError(
                f"redis source: entry {entry_id} of stream {stream!r} has no field {missing.args[0]!r} "
                f"(its fields: {', '.join(sorted(fields))})"
            ) from None

    @staticmethod
    def _check_intact(client, partition: _StreamRange) -> None:
        stream, span = partition.stream, f"[{partition.start}, {partition.end})"
        if not client.exists(stream):
            raise InputError(f"redis source: stream {stream!r} was deleted while this micro-batch reads {span} of it")
        # Redis 7 records the largest id that XDEL removed (not what trimming removed);
        # 0-0, which no entry can have, when it removed none.
        deleted = client.xinfo_stream(stream).get("max-deleted-entry-id", "0-0")
        if deleted != "0-0" and _parse(partition.start) <= _parse(deleted) < _parse(partition.end):
            raise InputError(
                f"redis source: entries of stream {stream!r} in this micro-batch's range {span} were "
                f"deleted (up to {deleted}); delete only entries before the job's clock"
            )

