"""The Python peer: Bytewax's keyed fold (``fold_final``) over the same files, one
file per epoch, with recovery on (a snapshot of every changed key each epoch)."""

from __future__ import annotations

import importlib.util
import shutil
import time
from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq

from bench.data import Dataset
from bench.measure import Batch, MemorySampler, RunResult, directory_bytes, summarize

__all__ = ["available", "run_bytewax"]


def available() -> bool:
    """Whether Bytewax is installed (the ``bench`` extra)."""
    return importlib.util.find_spec("bytewax") is not None


def _flow(files: tuple[str, ...], starts: list[float]):
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
    from bytewax.outputs import DynamicSink, StatelessSinkPartition

    class FilesPartition(StatefulSourcePartition):
        """Emits one file per call as ``(key, value)`` items; its snapshot is the next file."""

        def __init__(self, resume: int | None):
            self.next = resume or 0

        def next_batch(self):
            starts.append(time.monotonic())
            if self.next >= len(files):
                raise StopIteration()
            table = pq.read_table(files[self.next], columns=["key", "value"])
            self.next += 1
            return list(zip(table.column("key").to_pylist(), table.column("value").to_pylist()))

        def snapshot(self) -> int:
            return self.next

    class Files(FixedPartitionedSource):
        def list_parts(self):
            return ["files"]

        def build_part(self, step_id, for_part, resume_state):
            return FilesPartition(resume_state)

    class Discard(StatelessSinkPartition):
        def write_batch(self, items) -> None:
            pass

    class DiscardSink(DynamicSink):
        def build(self, step_id, worker_index, worker_count):
            return Discard()

    flow = Dataflow("bench")
    pairs = op.input("files", flow, Files())
    totals = op.fold_final("count_sum", pairs, lambda: (0, 0), lambda acc, value: (acc[0] + 1, acc[1] + value))
    op.output("discard", totals, DiscardSink())
    return flow


def run_bytewax(dataset: Dataset, work: Path) -> RunResult:
    """Runs the fold over ``dataset``; each epoch (one file) is timed from one
    ``next_batch`` call to the next, the last one until the dataflow ends."""
    from bytewax.recovery import RecoveryConfig, init_db_dir
    from bytewax.testing import run_main

    recovery = work / "runs" / f"bytewax-{dataset.name}"
    shutil.rmtree(recovery, ignore_errors=True)
    recovery.mkdir(parents=True)
    init_db_dir(recovery, 1)
    starts: list[float] = []
    result = RunResult("bytewax", dataset.distribution, dataset.keys, dataset.batch_rows)
    with MemorySampler() as memory:
        began = time.monotonic()
        # A zero epoch interval closes an epoch after every call of next_batch.
        run_main(_flow(dataset.files, starts), epoch_interval=timedelta(0), recovery_config=RecoveryConfig(recovery))
        ended = time.monotonic()
    result.wall_s = ended - began
    ends = starts[1:len(dataset.files)] + [ended]
    batches = [Batch(dataset.batch_rows, (end - start) * 1000) for start, end in zip(starts, ends)]
    summarize(result, batches)
    result.peak_driver_mb, result.peak_worker_mb = memory.driver_mb, None
    result.cpu_s = memory.cpu_s
    result.checkpoint_bytes = directory_bytes(str(recovery))
    result.checkpoint_bytes_per_batch = sum(result.checkpoint_bytes.values()) / len(batches)
    return result
