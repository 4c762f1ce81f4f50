"""Job directories written as the Spark runtime writes them, without Spark.

``JobWriter`` runs micro-batches of messages through the runtime's own key group
function (``persistent.runtime.stateful.GroupFunction``, with the fakes of
``spark_groups`` for Spark's ``GroupState`` and accumulator): the key groups apply
their messages, write their due checkpoints and report them as on the executors.
It then commits each batch from the groups' ``GroupReport``s with the runtime's own
``persistent.runtime.commit.Commit``: sink (``KeptResults``), clock, retention and
the batch's ``BatchProgress``.
``run_cli`` runs the command line in the test's process.
"""

from __future__ import annotations

import dataclasses
import itertools
import zlib
from collections import Counter

import numpy as np
import pandas as pd
from spark_groups import Accumulator, GroupState, frame

from monoids import Sum
from persistent import PersistentTask
from persistent.core.badrecords import BadRecords, LateRecords
from persistent.runtime.commit import Commit
from persistent.runtime.keygroup import whole_every_ms
from persistent.runtime.recovery import plan
from persistent.runtime.reports import GroupReport
from persistent.runtime.stateful import RESULT_COLUMNS, GroupFunction
from persistent.sinks.base import BatchId, Sink
from persistent.storage.filesystems import JobStorage
from persistent.storage.fs import FileSystem, LocalFileSystem
from persistent.storage.job_directory import JobDirectory
from persistent.storage.records import BatchProgress
from persistent.tools import cli
from state import Window, WindowState


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
        #: Each key group's state in Spark's state store, once it has run.
        self.states: dict[int, GroupState] = {}
        self.sent: list[tuple[str, int, int]] = []
        self.sink = KeptResults()
        self.batches = 0
        recovery = plan(self.directory, groups)  # a fresh start, as Job.start plans it
        self.commit = Commit(self.directory, recovery, self.sink, windowed=isinstance(task.state_spec(), WindowState),
                             whole_every_ms=whole_every_ms(interval_ms))
        self.directory.fs.write_atomic(self.directory.fs.join(self.directory.spark, "offsets", "0"), b"v1")
        self.reports = Accumulator()
        self.run_group = GroupFunction(task=task, interval_ms=interval_ms, recovery=recovery, checkpoints=True,
                                       bad_records=BadRecords.FAIL, late_records=LateRecords.DROP, carries=True,
                                       storage=JobStorage(root), reports=self.reports)

    def group_of(self, key: str) -> int:
        """The key group of ``key`` (Spark hashes keys its own way)."""
        return zlib.crc32(key.encode()) % self.group_count

    @property
    def watermark_ms(self) -> int:
        """The job's watermark in the next micro-batch: the newest event time of the
        batches before (the watermark delay is 0); Spark's starts at 0, the job's at 1."""
        return max([1, *(ts for _, ts, _ in self.sent)])

    def batch(self, messages: list[tuple[str, int, int]], *, finished_at_ms: int = 1_700_000_000_000,
              seconds: float = 0.5, dead_letters: int = 0, checkpoint_seconds: float = 0.0,
              commit_seconds: float = 0.0) -> BatchProgress:
        """One micro-batch of ``(key, timestamp_ms, value)`` messages at ``watermark_ms``;
        returns its progress. As on Spark, a key group runs when it has messages or its
        timeout fired (the watermark reached its next checkpoint boundary).

        The first key group's report carries ``dead_letters`` (as late messages it
        output; none is written) and ``checkpoint_seconds``, the others' none; the
        commit takes ``commit_seconds`` of the batch's ``seconds`` and ends at
        ``finished_at_ms``."""
        watermark_ms, results, reports = self.watermark_ms, [], []
        mine = {grp: [(k, ts, v, 0) for k, ts, v in messages if self.group_of(k) == grp]
                for grp in {self.group_of(key) for key, _, _ in messages}}
        for grp in range(self.group_count):
            state = self.states.get(grp)
            if state is not None:
                state.watermark_ms = watermark_ms
            if grp not in mine and not (state and state.timed_out):
                continue
            state = self.states.setdefault(grp, GroupState(watermark_ms))
            for row in self.run_group((grp,), iter([frame(mine[grp])] if grp in mine else []), state):
                results.append(pd.DataFrame({name: row[name][0] for name in RESULT_COLUMNS}))
            first = not reports
            reports.append(dataclasses.replace(self.reports.value[grp], late_records=dead_letters if first else 0,
                                               checkpoint_seconds=checkpoint_seconds if first else 0.0))
        self.sent.extend(messages)
        commit = dataclasses.replace(self.commit, timer=CommitTime(seconds - commit_seconds, commit_seconds,
                                                                   finished_at_ms))
        results = pd.concat(results, ignore_index=True) if results else pd.DataFrame()
        progress = commit(self.batches, Computed(results, reports))
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


class KeptResults(Sink):
    """A sink that keeps each batch's results, by ``BatchId``."""

    def __init__(self):
        self.batches: dict[BatchId, pd.DataFrame] = {}

    def write(self, results, batch: BatchId, windowed: bool) -> None:
        self.batches[batch] = results


@dataclasses.dataclass
class Computed:
    """A micro-batch the key groups have computed (``persistent.runtime.commit.MicroBatch``);
    its dead letters are counted, not written."""

    results: pd.DataFrame
    computed: list[GroupReport]

    def compute(self) -> None:
        pass

    def reports(self) -> list[GroupReport]:
        return self.computed

    def write_dead_letters(self, batch: BatchId) -> None:
        pass


class CommitTime:
    """A commit's time (``persistent.runtime.commit.Timer``): each commit, which reads
    ``monotonic`` as it begins, once the batch is computed and as it ends, spends
    ``computing`` seconds computing and ``commit`` seconds after that, and ends at
    ``finished_at_ms``."""

    def __init__(self, computing: float, commit: float, finished_at_ms: int):
        self.readings, self.finished_at_ms = itertools.cycle((0.0, computing, computing + commit)), finished_at_ms

    def monotonic(self) -> float:
        return next(self.readings)

    def time(self) -> float:
        return self.finished_at_ms / 1000


def four_batches(writer: JobWriter) -> None:
    """Keys k0..k6 over event times 1..448 in four batches, each at the newest time of
    the ones before: checkpoints at 100, 200 and 400 in the last three."""
    messages = [(f"k{i % 7}", ts, i % 5) for i, ts in enumerate(range(1, 450, 3))]
    writer.batch([m for m in messages if m[1] < 150], finished_at_ms=1_700_000_000_000, seconds=0.5,
                 commit_seconds=0.2)
    writer.batch([m for m in messages if 150 <= m[1] < 250], finished_at_ms=1_700_000_001_000, seconds=0.25,
                 dead_letters=2, checkpoint_seconds=0.015, commit_seconds=0.125)
    writer.batch([m for m in messages if 250 <= m[1] < 410], finished_at_ms=1_700_000_002_000, seconds=1.0,
                 checkpoint_seconds=0.03, commit_seconds=0.5)
    writer.batch([m for m in messages if m[1] >= 410], finished_at_ms=1_700_000_003_000, seconds=0.125,
                 dead_letters=1, checkpoint_seconds=0.06, commit_seconds=0.0625)


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of ``persistent ARGV``."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err
