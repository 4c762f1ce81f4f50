"""The dead-letter output's layout: one directory of JSON lines per micro-batch under
the job's dead-letter directory (by default ``DIR/dead-letters``,
``persistent.storage.job_directory.JobDirectory.default_dead_letters``)."""

from __future__ import annotations

import os
from dataclasses import asdict, fields

from persistent.core.badrecords import BadRecord

__all__ = ["DeadLetters"]


class DeadLetters:
    """The dead-letter output: one directory of JSON lines per micro-batch,
    ``DIR/generation=G/batch=N/``, each line a ``BadRecord`` (``position``, ``record``,
    ``reason``; for a late message also ``event_time_ms`` and ``watermark_ms``). A
    replayed batch overwrites its own directory, so each record of a batch is listed
    once. After a restart from the clock (recovery path B) the sources
    re-read records, and one without an event time (so not recognized as before the
    restore point) may be listed again in the new generation, at the same position."""

    def __init__(self, directory: str):
        self.directory = directory.rstrip("/")

    def write(self, records, batch) -> None:
        """Writes a Spark DataFrame whose one string column holds ``BadRecord`` JSON."""
        target = f"{self.directory}/generation={batch.generation}/batch={batch.batch:010d}"
        records.coalesce(1).write.mode("overwrite").text(target)

    def read(self):
        """All dead letters in a local directory, as pandas (columns ``generation``,
        ``batch``, ``position``, ``record``, ``reason``, ``event_time_ms`` and
        ``watermark_ms``), oldest batch first."""
        import pandas as pd

        from persistent.storage.fs import local_path

        root = local_path(self.directory)
        rows = []
        for generation in _partitions(root, "generation"):
            for batch in _partitions(os.path.join(root, f"generation={generation}"), "batch"):
                folder = os.path.join(root, f"generation={generation}", f"batch={batch:010d}")
                for name in sorted(os.listdir(folder)):
                    if name.startswith("part-"):
                        with open(os.path.join(folder, name), encoding="utf-8") as lines:
                            rows.extend({"generation": generation, "batch": batch, **asdict(BadRecord.from_json(line))}
                                        for line in lines if line.strip())
        columns = ["generation", "batch", *(f.name for f in fields(BadRecord))]
        return pd.DataFrame(rows, columns=columns).astype({"event_time_ms": "Int64", "watermark_ms": "Int64"})


def _partitions(folder: str, name: str) -> list[int]:
    """The sorted values of the ``name=VALUE`` subdirectories of ``folder``."""
    if not os.path.isdir(folder):
        return []
    prefix = f"{name}="
    return sorted(int(entry[len(prefix):]) for entry in os.listdir(folder) if entry.startswith(prefix))
