"""The real stores beside a plain in-memory model, through random runs with crashes.

A job of ``TASKS`` checkpoints every ``INTERVAL_MS``; the driver advances the clock
to the newest time every task holds; crashes drop every store object (and each
task's in-memory progress) and may leave half-written temporary files behind.
Invariants: the clock never moves backwards except by a rewind, the clock always
names durable, readable checkpoints, every clock in the history stays restorable
under the driver's retention, and the stores agree with the model.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from profiles import examples

from persistent.storage.checkpoint_store import CheckpointStore, encode_record
from persistent.storage.clock_store import ClockStore, verify_clock
from persistent.storage.fs import TEMP_PREFIX, LocalFileSystem

TASKS = ("group-0000", "group-0001", "group-0002")
INTERVAL_MS = 10
KEEP = 3
# tmpfs makes the stores' fsyncs free, which keeps the run fast.
_FAST_TMP = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None

Clock = tuple[int, dict[str, int]]


def payload(task: str, timestamp_ms: int) -> bytes:
    """The state of ``task`` at ``timestamp_ms``: deterministic, as a replay recomputes it."""
    return f"{task}@{timestamp_ms};".encode() * (timestamp_ms // INTERVAL_MS % 4)


class StoresMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.fs = LocalFileSystem()
        self.root = tempfile.mkdtemp(prefix="stores-model-", dir=_FAST_TMP)
        self.checkpoint_root = self.fs.join(self.root, "checkpoints")
        self.durable: dict[str, dict[int, bytes]] = {task: {} for task in TASKS}
        self.progress_ms = dict.fromkeys(TASKS, 0)  # each live task's newest checkpoint; lost in a crash
        self.clock: Clock | None = None
        self.history: list[Clock] = []
        self.last_read_ms = 0
        self.rewound = False
        self.open_stores()

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def open_stores(self) -> None:
        self.checkpoints = {task: self.open_checkpoints(task) for task in TASKS}
        self.clock_store = ClockStore(self.fs, self.root, keep=KEEP)

    def open_checkpoints(self, task: str) -> CheckpointStore:
        return CheckpointStore(self.fs, self.checkpoint_root, task)

    def next_clock(self) -> Clock | None:
        """The newest time every task holds, with each task's newest time; ``None`` before that."""
        common = set.intersection(*(set(held) for held in self.durable.values()))
        if not common:
            return None
        return max(common), {task: max(held) for task, held in self.durable.items()}

    def leave_temp_file(self, directory: str, name: str, raw: bytes) -> None:
        self.fs.write_atomic(self.fs.join(directory, f"{TEMP_PREFIX}{uuid.uuid4().hex}-{name}"), raw)

    def record_clock(self, clock: Clock) -> None:
        self.clock = clock
        self.history = (self.history + [clock])[-KEEP:]

    def persist_next_checkpoint(self, task: str) -> None:
        timestamp_ms = self.progress_ms[task] + INTERVAL_MS
        data = payload(task, timestamp_ms)
        self.checkpoints[task].persist(timestamp_ms, data)
        self.durable[task][timestamp_ms] = data
        self.progress_ms[task] = timestamp_ms

    def restart(self) -> None:
        """Drops every store object and each task's progress, as a crashed job does, and reopens."""
        self.open_stores()
        restart_ms = self.clock[0] if self.clock else 0
        self.progress_ms = dict.fromkeys(TASKS, restart_ms)
        for task, held in self.durable.items():
            assert {t: self.checkpoints[task].read(t).data for t in self.checkpoints[task].times()} == held

    @rule(tasks=st.sets(st.sampled_from(TASKS), min_size=1))
    def persist_next_checkpoints(self, tasks: set[str]) -> None:
        for task in sorted(tasks):
            self.persist_next_checkpoint(task)

    @precondition(lambda self: self.next_clock() is not None)
    @rule()
    def advance_clock(self) -> None:
        clock = self.next_clock()
        record = self.clock_store.advance(*clock)
        assert (record.clock_ms, dict(record.task_clocks)) == clock
        if clock != self.clock:
            self.record_clock(clock)

    @rule(
        unfinished=st.sampled_from(["nothing", "checkpoint", "clock", "clock history"]),
        task=st.sampled_from(TASKS),
        keep_bytes=st.integers(0, 80),
    )
    def crash(self, unfinished: str, task: str, keep_bytes: int) -> None:
        """Crashes, perhaps in the middle of a write that leaves a temporary file behind."""
        timestamp_ms = self.progress_ms[task] + INTERVAL_MS
        if unfinished == "checkpoint":
            store = self.checkpoints[task]
            raw = encode_record(timestamp_ms, payload(task, timestamp_ms))[:keep_bytes]
            self.leave_temp_file(store.directory, store.path(timestamp_ms).rsplit("/", 1)[1], raw)
        elif unfinished == "clock":
            raw = encode_record(timestamp_ms, b'{"clock_ms": ')[:keep_bytes]
            self.leave_temp_file(self.root, "clock", raw)
        elif unfinished == "clock history" and self.history:
            entries = self.fs.list_names(self.clock_store.history_directory)
            raw = encode_record(timestamp_ms, b'{"clock_ms": ')[:keep_bytes]
            self.leave_temp_file(self.clock_store.history_directory, entries[-1], raw)
        self.restart()

    @rule()
    def crash_between_checkpoints_and_clock(self) -> None:
        self.persist_next_checkpoints(set(TASKS))
        self.restart()

    @precondition(lambda self: self.next_clock() not in (None, self.clock))
    @rule()
    def crash_between_clock_and_history_write(self) -> None:
        record = self.clock_store.advance(*self.next_clock())
        history_directory = self.clock_store.history_directory
        self.fs.delete(self.fs.join(history_directory, self.fs.list_names(history_directory)[-1]))
        self.record_clock((record.clock_ms, dict(record.task_clocks)))
        self.history.pop()
        self.restart()

    @precondition(lambda self: self.clock is not None)
    @rule()
    def retain_as_the_driver_does(self) -> None:
        oldest_ms = self.clock_store.oldest_restorable_ms()
        for task, held in self.durable.items():
            self.checkpoints[task].retain(oldest_ms)
            newest_ms = max(held)
            self.durable[task] = {t: d for t, d in held.items() if t >= oldest_ms or t == newest_ms}

    def restorable_clocks(self) -> list[int]:
        """Clocks in history whose checkpoints every task still holds."""
        return sorted({c for c, _ in self.history if all(c in held for held in self.durable.values())})

    @precondition(lambda self: self.restorable_clocks())
    @rule(data=st.data())
    def rewind(self, data: st.DataObject) -> None:
        clock_ms = data.draw(st.sampled_from(self.restorable_clocks()), label="rewind to")
        self.clock_store.rewind(clock_ms)
        for task in TASKS:
            self.checkpoints[task].delete_after(clock_ms)
            self.durable[task] = {t: d for t, d in self.durable[task].items() if t <= clock_ms}
        # The records after the one rewound to are of the abandoned timeline.
        target = max(i for i, (c, _) in enumerate(self.history) if c == clock_ms)
        self.history = self.history[: target + 1]
        self.record_clock((clock_ms, dict.fromkeys(TASKS, clock_ms)))
        self.rewound = True
        self.restart()

    @invariant()
    def clock_never_moves_backwards_except_by_rewind(self) -> None:
        record = self.clock_store.read()
        clock_ms = record.clock_ms if record else 0
        assert self.rewound or clock_ms >= self.last_read_ms
        self.last_read_ms, self.rewound = clock_ms, False

    @invariant()
    def clock_names_durable_readable_checkpoints(self) -> None:
        record = self.clock_store.read()
        if record is not None:
            verify_clock(record, self.open_checkpoints)

    @invariant()
    def every_clock_in_the_history_is_restorable(self) -> None:
        for record in self.clock_store.history():  # the current clock: clock_names_durable_readable_checkpoints
            for task in TASKS:
                self.checkpoints[task].require(record.clock_ms)

    @invariant()
    def stores_agree_with_the_model(self) -> None:
        record = self.clock_store.read()
        assert (record and (record.clock_ms, dict(record.task_clocks))) == self.clock
        assert [(r.clock_ms, dict(r.task_clocks)) for r in self.clock_store.history()] == self.history
        for task, held in self.durable.items():
            assert self.checkpoints[task].times() == sorted(held)


StoresMachine.TestCase.settings = settings(
    max_examples=examples(50),
    stateful_step_count=30,
    suppress_health_check=[HealthCheck.too_slow],
)
test_stores_agree_with_a_model_through_crashes_and_rewinds = StoresMachine.TestCase
