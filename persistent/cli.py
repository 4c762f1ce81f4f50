"""The ``persistent`` command line.

    persistent clock CHECKPOINT_DIR     the global minimum checkpoint clock and each task's clock

It reads the store directly (no Spark, no JVM) from a local path or ``file://`` URI.
"""

from __future__ import annotations

import argparse
import datetime
import sys

from state.clock_store import ClockStore
from state.errors import StateError
from state.fs import LocalFileSystem

__all__ = ["main"]


def _iso(timestamp_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds")


def _clock(args: argparse.Namespace) -> int:
    fs = LocalFileSystem()
    try:
        record = ClockStore(fs, fs.join(args.checkpoint_dir, "clock")).read()
    except StateError:
        raise
    except ValueError as exc:
        print(f"error: {exc}; only local paths and file:// URIs can be read here", file=sys.stderr)
        return 2
    if record is None:
        print(f"error: {args.checkpoint_dir} has no checkpoint clock yet (the job has not checkpointed)",
              file=sys.stderr)
        return 1
    print(f"clock {record.clock_ms} ms  {_iso(record.clock_ms)}")
    for task, clock_ms in sorted(record.task_clocks.items()):
        print(f"  {task}  {clock_ms} ms  {_iso(clock_ms)}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="persistent", description="Inspect the checkpoints of persistent jobs.")
    commands = p.add_subparsers(dest="command", required=True)
    clock = commands.add_parser("clock", help="print the global minimum checkpoint clock and the task clocks")
    clock.add_argument("checkpoint_dir", help="the job's checkpoint directory (local path or file:// URI)")
    clock.set_defaults(run=_clock)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except (StateError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
