"""Bad input: records a job cannot process, and what happens to them.

A record is *bad* when the source cannot parse it (an unparseable line, a missing
or non-numeric timestamp, a missing column), when its event time is unusable
(null, negative, or too far ahead of the micro-batch's time), or when the task or
its monoid refuses it (``process_message``/``process_batch`` raises on it, the
monoid refuses its value, or a key's sum would overflow). Each one is described by
a ``BadRecord``: where it comes from, the record as text, and why it is bad.

A job chooses with ``BadRecords`` what happens to them:

- ``FAIL``: the micro-batch fails with a ``BadRecordError`` naming the record and
  its position, before anything of that batch reaches the sink or the clock;
- ``DEAD_LETTER``: the record goes to the dead-letter output
  (``persistent.storage.dead_letters.DeadLetters``), is
  counted in the progress record, and the other records are processed.

Either way a bad record changes no state.

A *late* message (behind the watermark, see ``persistent.runtime.job.Job``) is not bad:
it changes no state and is counted; with ``LateRecords.OUTPUT`` it goes to the
dead-letter output too, as a ``BadRecord`` with reason ``late``, its event time and
the watermark it missed.

This module is pure Python: the readers, the key groups and the driver share it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from persistent.core.choices import Choice
from persistent.core.errors import InputError

__all__ = ["BadRecords", "LateRecords", "BadRecord", "BadRecordError", "BAD_RECORD_COLUMN", "late_messages"]

#: Column that marks a bad record in a source's rows: null for a good row, else the
#: ``BadRecord`` as JSON.
BAD_RECORD_COLUMN = "bad_record"


class BadRecords(Choice):
    """What a job does with a bad record."""

    FAIL = "fail"
    DEAD_LETTER = "dead-letter"


class LateRecords(Choice):
    """What a job does with a late message, besides counting it."""

    DROP = "drop"
    OUTPUT = "output"


#: ``BadRecord.reason`` of a late message.
LATE = "late"


@dataclass(frozen=True)
class BadRecord:
    """One bad record: its ``position`` in the source (a file and line or row; ``None``
    for a message whose position the source does not carry), the ``record`` as text,
    and the ``reason`` it is bad. A late message (reason ``late``) also has its
    ``event_time_ms`` and the ``watermark_ms`` it missed."""

    position: str | None
    record: str
    reason: str
    event_time_ms: int | None = None
    watermark_ms: int | None = None

    @classmethod
    def of_message(cls, key: Any, timestamp: Any, value: Any, reason: str, **times: int) -> BadRecord:
        """A bad message: the record is the message as JSON (key, timestamp, value)."""
        message = {"key": _plain(key), "timestamp": _plain(timestamp), "value": _plain(value)}
        return cls(None, json.dumps(message, separators=(",", ":"), default=str), reason, **times)

    @classmethod
    def late(cls, key: Any, timestamp_ms: int, value: Any, watermark_ms: int) -> BadRecord:
        """A message behind the watermark."""
        return cls.of_message(key, timestamp_ms, value, LATE, event_time_ms=int(timestamp_ms),
                              watermark_ms=int(watermark_ms))

    def json(self) -> str:
        data = {name: value for name, value in asdict(self).items() if value is not None or name == "position"}
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> BadRecord:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, data: dict) -> BadRecord:
        return cls(data.get("position"), data["record"], data["reason"], data.get("event_time_ms"),
                   data.get("watermark_ms"))

    def describe(self) -> str:
        """One line naming the position, the reason and the record."""
        where = f"{self.position}: " if self.position else ""
        behind = ""
        if self.reason == LATE:
            behind = f" (event time {self.event_time_ms} ms, watermark {self.watermark_ms} ms)"
        return f"{where}{self.reason}{behind}; record: {self.record}"


def late_messages(messages, watermark_ms: int) -> list[BadRecord]:
    """The late records of ``messages`` (a pandas frame of ``key``, ``timestamp``,
    ``value``), which missed ``watermark_ms``."""
    return [BadRecord.late(key, timestamp, value, watermark_ms)
            for key, timestamp, value in messages.itertuples(index=False)]


def _plain(value: Any) -> Any:
    """numpy scalars as Python values, for JSON."""
    return value.item() if isinstance(value, np.generic) else value


class BadRecordError(InputError):
    """A bad record in a job that fails on bad records (``BadRecords.FAIL``): ``record``,
    found ``where`` (a micro-batch, for instance; empty when the caller knows)."""

    def __init__(self, record: BadRecord, where: str = ""):
        self.record, self.where = record, where
        super().__init__(f"bad record{' in ' + where if where else ''} at {record.describe()}")

    def __reduce__(self):
        return type(self), (self.record, self.where), self.__dict__
