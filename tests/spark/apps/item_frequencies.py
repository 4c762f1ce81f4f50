"""A job whose state is large for its input: a Count-Min sketch (80 KiB) per key.

    spark-submit tests/spark/apps/item_frequencies.py --checkpoint DIR --output sqlite:///PATH --total N --keys K

The generator's message ``i`` has key ``k{i % K}`` and value ``i``; each key's sketch
counts its values, and the sink gets each key's total weight (its message count).
``tests/spark/test_large_state.py`` runs it with a driver too small to hold the state.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from monoids import CountMin  # noqa: E402
from persistent import GeneratorSource, Job, PersistentTask  # noqa: E402
from persistent.tools.options import add_job_options, job_settings, run_app  # noqa: E402
from state import NonWindowState  # noqa: E402

SKETCH = CountMin(num_hashes=5, num_buckets=2048)


class ItemFrequencies(PersistentTask):
    def persistent_state(self):
        return NonWindowState(SKETCH)

    def process_batch(self, messages):
        return SKETCH.prepare_column(messages["value"].astype(str).tolist())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keys", type=int, required=True)
    p.add_argument("--total", type=int, required=True)
    p.add_argument("--rows-per-batch", type=int, default=1_000, help="a sketch per message: keep batches small")
    add_job_options(p)
    return p


def build_job(args) -> Job:
    return Job(task=ItemFrequencies(),
               source=GeneratorSource(keys=args.keys, total=args.total, max_rows_per_batch=args.rows_per_batch),
               **job_settings(args, table="frequencies", key_column="key", value_column="weight"))


def main(argv=None) -> int:
    return run_app(parser(), build_job, "item-frequencies", argv)


if __name__ == "__main__":
    sys.exit(main())
