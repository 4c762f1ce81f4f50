"""Job directories written as the Spark runtime's driver writes them, without Spark.

``JobWriter`` runs real key groups (``persistent.runtime.keygroup``) over micro-batches of
messages, persists their due checkpoints with the real ``CheckpointStore``, advances
the real ``ClockStore`` to the minimum task clock, and records each batch's
``BatchProgress`` with ``JobDirectory.record_progress``, as the runtime does.
``run_cli`` runs the command line in the test's process.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections import Counter

import numpy as np
import pandas as pd

from monoids import Count, Sum
from persistent import PersistentTask
from persistent.runtime.keygroup import MESSAGE_COLUMNS, KeyGroup
from persistent.storage.job_directory import BatchProgress, JobDirectory, task_name
from persistent.tools import cli
from state import NonWindowState, Window, WindowState
from state.fs import FileSystem, LocalFileSystem


class Counting(PersistentTask):
    def persistent_state(self):
        return NonWindowState(Count())

    def process_batch(self, messages):
        return np.ones(len(messages), dtype=np.int64)


class SlidingSum(PersistentTask):
    WINDOW = Window(300, 100)

    def persistent_state(self):
        return WindowState(Sum(), self.WINDOW)

    def process_batch(self, messages):
        return messages["value"].to_numpy(dtype=np.int64)


class JobWriter:
    """Writes the job directory ``root`` batch by batch; see the module docstring."""

    def __init__(self, root: str, task: PersistentTask, groups: int = 3, interval_ms: int = 100,
                 fs: FileSystem | None = None):
        self.directory = JobDirectory(fs or LocalFileSystem(), root)
        self.task, self.interval_ms, self.group_count = task, interval_ms, groups
        self.groups: dict[int, KeyGroup] = {}
        self.sent: list[tuple[str, int, int]] = []
        self.batches = 0
        self.directory.plan(groups)  # a fresh start, as Job.start plans it
        self.directory.fs.write_atomic(self.directory.fs.join(self.directory.spark, "offsets", "0"), b"v1")

    def group_of(self, key: str) -> int:
        return zlib.crc32(key.encode()) % self.group_count

    def batch(self, messages: list[tuple[str, int, int]], watermark_ms: int, *, finished_at_ms: int = 1_700_000_000_000,
              seconds: float = 0.5, dead_letters: int = 0, checkpoint_seconds: float | None = None,
              commit_seconds: float | None = None) -> BatchProgress:
        """One micro-batch: ``(key, timestamp_ms, value)`` messages, then the watermark; returns its progress."""
        frame = pd.DataFrame(messages, columns=list(MESSAGE_COLUMNS))
        checkpoints, applied, results, checkpoint_bytes = {}, 0, 0, 0
        touched = {self.group_of(key) for key, _, _ in messages} | set(self.groups)
        for grp in sorted(touched):
            group = self.groups.setdefault(grp, KeyGroup(self.task, self.interval_ms))
            mine = frame[[self.group_of(key) == grp for key in frame["key"]]]
            output = group.process(mine.reset_index(drop=True), watermark_ms)
            applied, results = applied + output.applied, results + len(output.results)
            if output.checkpoint is not None:
                time_ms, data = output.checkpoint
                checkpoint_bytes += self.directory.store(grp).persist(time_ms, data).size
                checkpoints[task_name(grp)] = time_ms
        record = self.directory.clock.read()
        task_clocks = {**(record.task_clocks if record else {}), **checkpoints}
        if task_clocks:
            record = self.directory.clock.advance(min(task_clocks.values()), task_clocks)
        self.sent.extend(messages)
        progress = BatchProgress(
            generation=0,
            batch=self.batches,
            rows=applied,
            late=0,
            replayed=0,
            results=results,
            checkpoints=len(checkpoints),
            clock_ms=record.clock_ms if record else None,
            seconds=seconds,
            watermark_ms=watermark_ms,
            finished_at_ms=finished_at_ms,
            state_bytes={task_name(g): len(group.encode()) for g, group in self.groups.items()},
            dead_letters=dead_letters,
            checkpoint_bytes=checkpoint_bytes,
            checkpoint_seconds=checkpoint_seconds,
            commit_seconds=commit_seconds,
        )
        self.directory.record_progress(dataclasses.asdict(progress))
        self.batches += 1
        return progress

    def counts_before(self, time_ms: int) -> dict[str, int]:
        """Messages per key with a timestamp before ``time_ms``, counted here."""
        return dict(Counter(key for key, ts, _ in self.sent if ts < time_ms))

    def window_sums_before(self, time_ms: int, window: Window) -> dict[tuple[str, int], int]:
        """Sum of values per (key, window start) over the messages before ``time_ms``."""
        sums: Counter = Counter()
        for key, ts, value in self.sent:
            if ts < time_ms:
                for start in window.starts_containing(ts):
                    sums[key, start] += value
        return dict(sums)


def three_batches(writer: JobWriter) -> None:
    """Keys k0..k6 over event times 0..449 in three batches: checkpoints at 100, 200 and 400."""
    messages = [(f"k{i % 7}", ts, i % 5) for i, ts in enumerate(range(0, 450, 3))]
    writer.batch([m for m in messages if m[1] < 150], watermark_ms=150, finished_at_ms=1_700_000_000_000, seconds=0.5,
                 checkpoint_seconds=0.03, commit_seconds=0.2)
    writer.batch([m for m in messages if 150 <= m[1] < 250], watermark_ms=250, finished_at_ms=1_700_000_001_000,
                 seconds=0.25, dead_letters=2, checkpoint_seconds=0.015, commit_seconds=0.125)
    writer.batch([m for m in messages if m[1] >= 250], watermark_ms=450, finished_at_ms=1_700_000_002_000,
                 seconds=1.0, dead_letters=1, checkpoint_seconds=0.06, commit_seconds=0.5)


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of ``persistent ARGV``."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err
