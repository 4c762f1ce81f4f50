"""A sink that prints results, for demos."""

from __future__ import annotations

from persistent.sinks.base import BatchId, Sink, result_columns

__all__ = ["ConsoleSink"]


class ConsoleSink(Sink):
    """Prints each micro-batch's first ``rows`` results (for demos; not exactly-once).
    It reads those only (``limit``), so the runtime computes the batch before it
    (``Sink.reads_once`` is False)."""

    def __init__(self, rows: int = 20):
        self.rows = rows

    def write(self, results, batch: BatchId, windowed: bool) -> None:
        columns = result_columns(windowed)
        frame = results.select(*columns).limit(self.rows).toPandas()
        if len(frame):
            print(f"-- batch {batch.generation}.{batch.batch}")
            print(frame.to_string(index=False))

    def append(self, results, batch: BatchId, windowed: bool) -> None:
        self.write(results, batch, windowed)
