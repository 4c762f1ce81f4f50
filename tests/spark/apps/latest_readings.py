"""A job whose results depend on the order its messages are folded in.

    spark-submit tests/spark/apps/latest_readings.py --input DIR --checkpoint DIR --output sqlite:///PATH

Per key: the label of the last reading (``Last``: on tied times, the later message)
and the float sum of the amounts. ``write_readings`` writes input whose every reading
of a micro-batch shares one event time, across two files read as two partitions, with
amounts 1e16, 1.0 and -1e16: folded in file order, the later file's label wins and the
sum stays 0.0 (1e16 + 1.0 rounds to 1e16); any other order changes one or both.
``tests/spark/test_fold_order.py`` runs it, and kills it at ``committed``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from monoids import Last, Product, Sum, Timestamped  # noqa: E402
from persistent import FilesSource, Job, PersistentTask  # noqa: E402
from persistent.tools.options import add_job_options, job_settings, run_app  # noqa: E402
from state import NonWindowState  # noqa: E402

#: Readings per micro-batch: (file, label, amount), every one at the batch's time.
READINGS = [("a", "a1", 1e16), ("a", "a2", 1.0), ("b", "b1", -1e16)]


class LatestAndTotal(PersistentTask):
    def persistent_state(self):
        return NonWindowState(Product(Last(), Sum(float)))

    def process_message(self, state, message):
        record = json.loads(message.value)
        state.update(message.timestamp, (Timestamped(message.timestamp, record["label"]), record["amount"]))


def write_readings(directory: Path, batches: int, keys: tuple[str, ...] = ("x", "y")) -> dict[str, str]:
    """Input of ``batches`` micro-batches (two files each) for every key of ``keys``;
    returns the result each key must end with, as the SQL sink holds it (JSON text)."""
    directory.mkdir(parents=True, exist_ok=True)
    for b in range(batches):
        for name in ("a", "b"):
            (directory / f"{b:03d}-{name}.jsonl").write_text("".join(
                json.dumps({"key": key, "timestamp": 100 * b + 1, "label": f"{label}@{b}", "amount": amount}) + "\n"
                for key in keys for file, label, amount in READINGS if file == name
            ))
    return {key: json.dumps([f"b1@{batches - 1}", 0.0], separators=(",", ":")) for key in keys}


def job(args: argparse.Namespace) -> Job:
    return Job(task=LatestAndTotal(),
               source=FilesSource(args.input, file_format="jsonl", max_files_per_batch=2),
               **job_settings(args, table="latest", key_column="key", value_column="latest"))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", required=True, help="directory of JSON-lines files (write_readings)")
    add_job_options(p)
    return p


def main(argv=None) -> int:
    return run_app(parser(), job, "latest-readings", argv)


if __name__ == "__main__":
    sys.exit(main())
