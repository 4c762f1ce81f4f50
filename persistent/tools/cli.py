"""The ``persistent`` command line.

    persistent run [SPARK-SUBMIT OPTIONS] APP.py [APP ARGS]   spark-submit with the project's defaults
    persistent run [SPARK-SUBMIT OPTIONS] EXAMPLE [APP ARGS]  the same, of an installed example (wordcount)
    persistent clock DIR                      the global minimum checkpoint clock and each task's clock
    persistent status DIR [--batches N]       recent micro-batches, watermark, clocks, state sizes
    persistent inspect DIR [--at T] [--key K] [--task NAME]   the state in a checkpoint, per key
    persistent rewind DIR --to T              prepare a restart from the earlier checkpoint at T

All but ``run`` read DIR without Spark or a JVM (``persistent.storage.filesystems``): a
local path, a ``file://``, ``webhdfs://NAMENODE[:PORT]/PATH`` or ``hdfs://NAMENODE[:PORT]/PATH``
URI (HDFS over HTTP), or an object store's ``s3a://`` (``s3://``) or ``gs://`` URI. Errors
are one line on stderr and a non-zero exit status; a reader that closes the pipe (``| head``)
ends a command quietly. The modules a command needs are imported when it runs, so that
``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import os
import pkgutil
import shlex
import sys
import time
from typing import TYPE_CHECKING, NoReturn

from persistent.core.errors import ConfigError, JobDirectoryError, PersistentError
from persistent.tools.environment import check_java

if TYPE_CHECKING:
    from persistent.storage.job_directory import JobDirectory
    from persistent.storage.records import BatchProgress
    from persistent.storage.clock_store import ClockRecord

__all__ = ["main", "parser"]

_DIR_HELP = (
    "the job's checkpoint directory: a local path, or a file://, webhdfs://NAMENODE[:PORT]/PATH, "
    "hdfs://NAMENODE[:PORT]/PATH (over WebHDFS), s3a://BUCKET/PATH (s3://) or gs://BUCKET/PATH URI"
)
#: spark-submit's options that take no value; every other option takes one.
_SUBMIT_SWITCHES = {"-h", "--help", "-v", "--verbose", "--version", "--supervise", "--usage-error"}


class UsageError(PersistentError):
    """The command line is wrong; exit status 2."""


# -- formatting ---------------------------------------------------------------------


def _iso(timestamp_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds")


def _time(timestamp_ms: int) -> str:
    return f"{timestamp_ms} ms  {_iso(timestamp_ms)}"


def _duration(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000)):
        if abs(ms) >= 2 * size:
            return f"{ms / size:,.1f} {unit}"
    return f"{ms / 1000:,.1f} s" if abs(ms) >= 1000 else f"{ms} ms"


def _lag(timestamp_ms: int, now_ms: int) -> str:
    """How far ``timestamp_ms`` is behind (or ahead of) wall time ``now_ms``."""
    behind = now_ms - timestamp_ms
    return f"{_duration(behind)} behind wall time" if behind >= 0 else f"{_duration(-behind)} ahead of wall time"


def _size(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _rate(rows: int, seconds: float) -> str:
    return f"{rows / seconds:,.0f}" if seconds > 0 else "-"


def _print_clock(record: ClockRecord, now_ms: int, state_bytes: dict[str, int] | None = None,
                 watermark_ms: int | None = None) -> None:
    behind = "" if watermark_ms is None else f", {_duration(watermark_ms - record.clock_ms)} behind the watermark"
    print(f"clock          {_time(record.clock_ms)}  ({_lag(record.clock_ms, now_ms)}{behind})")
    for task in sorted(set(record.task_clocks) | set(state_bytes or {})):
        clock = _time(record.task_clocks[task]) if task in record.task_clocks else "no checkpoint yet"
        size = f"  state {_size(state_bytes[task])}" if state_bytes and task in state_bytes else ""
        print(f"  {task}  {clock}{size}")


# -- clock and status ---------------------------------------------------------------


def _clock(args: argparse.Namespace) -> int:
    from persistent.tools.inspection import open_job

    directory = open_job(args.checkpoint_dir)
    record = directory.clock.read()
    if record is None:
        raise JobDirectoryError(f"{args.checkpoint_dir} has no checkpoint clock yet (the job has not checkpointed)")
    _print_clock(record, _now_ms())
    return 0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _status(args: argparse.Namespace) -> int:
    from persistent.tools.inspection import open_job, open_pipeline

    stages = open_pipeline(args.checkpoint_dir)
    if stages:
        for stage, root in enumerate(stages, 1):
            if stage > 1:
                print()
            print(f"-- stage {stage}")
            _job_status(open_job(root), args.batches)
        return 0
    _job_status(open_job(args.checkpoint_dir), args.batches)
    return 0


def _job_status(directory, batches: int) -> None:
    from persistent.storage.lease import describe, holder

    now_ms = _now_ms()
    print(f"job directory  {directory.root}")
    lease = holder(directory, now_ms)
    print(f"running        {describe(lease, now_ms)}" if lease else "running        no job (no live lease)")
    generation = directory.read_generation()
    if generation is not None:
        floor_ms = generation.floor_ms
        started = f"restored from the clock at {_time(floor_ms)}" if floor_ms else "started fresh"
        groups = f", {generation.key_groups} key groups" if generation.key_groups is not None else ""
        print(f"generation     {generation.generation}, {started}{groups}")
    progress = directory.read_progress(batches)
    if progress:
        _print_progress(progress, now_ms)
    else:
        print("progress       none yet: the job has not committed a micro-batch")
    record = directory.clock.read()
    if record is None:
        print("clock          none yet: no task has checkpointed")
        return
    state_bytes: dict[str, int] = {}
    for batch in progress:
        state_bytes.update(batch.state_bytes)
    _print_clock(record, now_ms, state_bytes, progress[-1].watermark_ms if progress else None)


def _print_progress(progress: list[BatchProgress], now_ms: int) -> None:
    last = progress[-1]
    print(
        f"last batch     {last.generation}.{last.batch}, committed {_iso(last.finished_at_ms)} "
        f"({_duration(now_ms - last.finished_at_ms)} ago)"
    )
    print(f"watermark      {_time(last.watermark_ms)}  ({_lag(last.watermark_ms, now_ms)})")
    if last.spark_half is not None:
        print("spark's half   " + ("loaded: messages fold or pack before the shuffle" if last.spark_half else
                                   "not loaded: every message crosses the shuffle as a row (the job's first lines "
                                   "say why)"))
    rows, seconds = sum(p.rows for p in progress), sum(p.seconds for p in progress)
    print(
        f"throughput     {rows:,} rows in {seconds:,.1f} s of processing in the last {len(progress)} "
        f"batch(es): {_rate(rows, seconds)} rows/s"
    )
    total = "" if last.late_total is None else f"{last.late_total:,} in all, "
    print(f"late           {total}{sum(p.late for p in progress):,} in the last {len(progress)} batch(es)")
    print(f"dead letters   {sum(p.dead_letters for p in progress):,} in the last {len(progress)} batch(es)")
    print(
        f"checkpoints    {sum(p.checkpoints for p in progress):,} written "
        f"({_size(sum(p.checkpoint_bytes for p in progress))}) in the last {len(progress)} batch(es)"
    )
    # Times of day (UTC): the batches shown are recent, and the last one's date is above.
    header = ("batch", "committed", "rows", "rows/s", "results", "seconds", "commit s", "late", "replayed",
              "dead letters", "checkpoints", "checkpoint bytes", "checkpoint s", "clock")
    table = [header] + [
        (
            f"{p.generation}.{p.batch}",
            _iso(p.finished_at_ms)[11:23],
            f"{p.rows:,}",
            _rate(p.rows, p.seconds),
            f"{p.results:,}",
            f"{p.seconds:.3f}",
            _seconds(p.commit_seconds),
            f"{p.late:,}",
            f"{p.replayed:,}",
            f"{p.dead_letters:,}",
            f"{p.checkpoints:,}",
            _size(p.checkpoint_bytes),
            _seconds(p.checkpoint_seconds),
            "-" if p.clock_ms is None else str(p.clock_ms),
        )
        for p in progress
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        cells = [cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        print("  " + "  ".join(cells).rstrip())


def _seconds(seconds: float | None) -> str:
    """A duration a progress record may lack (records of older versions)."""
    return "-" if seconds is None else f"{seconds:.3f}"


# -- inspect --------------------------------------------------------------------------


def _inspect(args: argparse.Namespace) -> int:
    from persistent.tools.inspection import open_job, read_state, task_names, times_held
    from persistent.storage.checkpoint_store import describe_times

    for module in args.imports:
        _import(module)
    directory = open_job(args.checkpoint_dir)
    at_ms = args.at if args.at is not None else _current_clock(directory)
    names = task_names(directory)
    if args.task and args.task not in names:
        raise JobDirectoryError(f"{directory.root} has no task {args.task!r} (tasks: {', '.join(names) or 'none'})")
    held = times_held(directory, [args.task] if args.task else names)
    tasks = [task for task, times in held.items() if at_ms in times]
    if args.task and not tasks:
        raise JobDirectoryError(
            f"task {args.task} has no checkpoint at {at_ms} ms (it holds {describe_times(held[args.task])})"
        )
    if not tasks:
        raise JobDirectoryError(f"no task of {directory.root} has a checkpoint at {at_ms} ms")
    missing = sorted(set(held) - set(tasks))
    if missing:
        print(
            f"note: {len(missing)} task(s) have no checkpoint at {at_ms} ms and are not shown: " + ", ".join(missing),
            file=sys.stderr,
        )
    print(_covered(directory, at_ms), file=sys.stderr)
    windowed = None
    for row in read_state(directory, at_ms, tasks):
        if args.key is not None and str(row.key) != args.key:
            continue
        if windowed is None:
            windowed = row.window_start_ms is not None
            print("\t".join(["task", "key", *(["window_start", "window_end"] if windowed else []), "value"]))
        window = [str(row.window_start_ms), str(row.window_end_ms)] if windowed else []
        print("\t".join([row.task, str(row.key), *window, repr(row.value) if args.raw else str(row.presented)]))
    if windowed is None:
        shown = f"key {args.key!r}" if args.key is not None else "keys"
        print(f"no {shown} in the checkpoints at {at_ms} ms of {len(tasks)} task(s)", file=sys.stderr)
    return 0


def _covered(directory: JobDirectory, at_ms: int) -> str:
    """What the values at checkpoint time ``at_ms`` hold, and what a sink holds beyond them."""
    note = (f"note: the state at checkpoint time {at_ms} ms ({_iso(at_ms)}) holds the messages with event time "
            f"before {at_ms} ms, none after")
    progress = directory.read_progress(1)
    if not progress or progress[-1].watermark_ms <= at_ms:
        return note
    last = progress[-1]
    return (
        f"{note}. The job has read on, to watermark {last.watermark_ms} ms (micro-batch {last.generation}.{last.batch}): "
        f"its sink's results count those messages too, so they may be larger. Until the next checkpoint they are "
        f"only in Spark's state store ({directory.spark}); the sink holds the newest values"
    )


def _current_clock(directory: JobDirectory) -> int:
    record = directory.clock.read()
    if record is None:
        raise JobDirectoryError(f"{directory.root} has no checkpoint clock yet; pass --at T")
    return record.clock_ms


def _import(module: str) -> None:
    """Imports ``module`` (from the working directory or the installed packages)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(f"--import {module}: {exc}") from None


# -- rewind ---------------------------------------------------------------------------


def _rewind(args: argparse.Namespace) -> int:
    from persistent.tools.inspection import open_job, rewind

    directory = open_job(args.checkpoint_dir)
    done = rewind(directory, args.to)
    before = f"from {done.from_ms} ms " if done.from_ms is not None else "(it was unreadable) "
    print(f"rewound the clock of {directory.root} {before}to {done.to_ms} ms ({_iso(done.to_ms)})")
    spark = f"deleted {directory.spark} (Spark's checkpoint)" if done.deleted_spark else f"{directory.spark} was absent"
    print(f"{spark}; deleted {done.deleted_checkpoints} checkpoint(s) after {done.to_ms} ms")
    print(
        f"the next start takes recovery path B: it restores {done.tasks} task(s) from their checkpoints at "
        f"{done.to_ms} ms, rewinds the sources to {done.to_ms} ms and emits the results after it again"
    )
    return 0


# -- run ------------------------------------------------------------------------------


def _split_submit_args(args: list[str]) -> tuple[list[str], str, list[str]]:
    """``(spark-submit options, APP.py, app arguments)`` of ``persistent run``'s arguments;
    an example's name stands for its installed file (``_application``)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-"):
            return args[:i], _application(arg), args[i + 1 :]
        i += 1 if arg in _SUBMIT_SWITCHES or "=" in arg else 2
    raise UsageError("persistent run needs the application: persistent run [SPARK-SUBMIT OPTIONS] APP.py [APP ARGS]")


def _application(app: str) -> str:
    """``app`` when it is a file; else, for a name such as ``wordcount``, the file of the
    installed example ``persistent.examples.wordcount``."""
    from persistent.storage.fs import LocalFileSystem

    if LocalFileSystem().kind(os.path.abspath(app)) == "file":  # a name, not a URI
        return app
    examples = _examples()
    if app in examples:
        return examples[app]
    names = ", ".join(sorted(examples)) or "none installed"
    raise UsageError(f"application {app} does not exist (or is not a file), nor is it an example ({names})")


def _examples() -> dict[str, str]:
    """The installed examples' files by name (the modules of ``persistent.examples``)."""
    spec = importlib.util.find_spec("persistent.examples")
    if spec is None or not spec.submodule_search_locations:
        return {}
    return {module.name: os.path.join(module.module_finder.path, f"{module.name}.py")
            for module in pkgutil.iter_modules(spec.submodule_search_locations) if not module.ispkg}


def submit_command(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The spark-submit command line and environment that ``persistent run args`` executes."""
    options, app, app_args = _split_submit_args(args)
    from pyspark.find_spark_home import _find_spark_home

    from persistent.storage.package_data import DEFAULTS_FILE, LOGGING_FILE

    spark_submit = os.path.join(_find_spark_home(), "bin", "spark-submit")
    defaults = [
        "--properties-file",
        str(DEFAULTS_FILE),
        "--conf",
        f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile={LOGGING_FILE.as_uri()}",
    ]
    environment = dict(os.environ)
    environment.setdefault("PYSPARK_PYTHON", sys.executable)
    return [spark_submit, *defaults, *options, app, *app_args], environment


def _submit_option(options: list[str], name: str) -> str | None:
    """The value of spark-submit's option ``name`` in ``options`` (the last one wins)."""
    value = None
    for i, option in enumerate(options):
        if option == name and i + 1 < len(options):
            value = options[i + 1]
        elif option.startswith(f"{name}="):
            value = option.partition("=")[2]
    return value


def _run(args: list[str]) -> NoReturn:
    """Runs the application once: a Python application in client mode as its own
    driver, whose ``SparkSession`` starts spark-submit with the options
    (``PYSPARK_SUBMIT_ARGS``), so that it refuses bad arguments before any JVM starts;
    anything else through spark-submit."""
    options, app, app_args = _split_submit_args(args)
    command, environment = submit_command(args)
    master = _submit_option(options, "--master")
    if master:
        from persistent.tools.preflight import check_master

        check_master(master)
    sys.stdout.flush()
    if app.endswith(".py") and _submit_option(options, "--deploy-mode") in (None, "client"):
        submit_args = command[1 : -1 - len(app_args)]
        python = environment.get("PYSPARK_DRIVER_PYTHON") or environment["PYSPARK_PYTHON"]
        environment["PYSPARK_SUBMIT_ARGS"] = shlex.join([*submit_args, "pyspark-shell"])
        os.execve(python, [python, app, *app_args], environment)
    check_java()
    os.execve(command[0], command, environment)


# -- the parser -----------------------------------------------------------------------


def _whole_number(what: str, smallest: int):
    """An argparse type: an integer of at least ``smallest``, described as ``what``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} (an integer)") from None
        if value < smallest:
            raise argparse.ArgumentTypeError(f"{what} must be at least {smallest}, got {value}")
        return value

    return parse


_time_ms = _whole_number("a time in ms", 0)


def _directory_command(commands, name: str, handler, summary: str, description: str) -> argparse.ArgumentParser:
    """A subcommand ``name DIR`` run by ``handler``."""
    command = commands.add_parser(name, help=summary, description=description)
    command.add_argument("checkpoint_dir", metavar="DIR", help=_DIR_HELP)
    command.set_defaults(handler=handler)
    return command


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="persistent",
        description="Run persistent jobs; read and rewind their checkpoint directories without a JVM.",
    )
    commands = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    commands.add_parser(
        "run",
        usage="persistent run [SPARK-SUBMIT OPTIONS] APP.py|EXAMPLE [APP ARGS]",
        help="run an application with spark-submit and the project's defaults",
        description=(
            "Runs pyspark's spark-submit with the defaults that ship in the package (--properties-file "
            "persistent/conf/spark-defaults.conf), the driver logging at WARN (persistent/conf/log4j2.properties) "
            "and PYSPARK_PYTHON set to this Python unless it is set. Options before APP.py go to spark-submit and "
            "override the defaults; the arguments after it go to the application. An EXAMPLE is the name of an "
            "installed example (count, wordcount, window_average, sessions, pipeline, demo: the modules of "
            "persistent.examples), which runs from its installed file. It checks --master, then runs APP.py once as "
            "its own driver, whose SparkSession starts spark-submit with the options (PYSPARK_SUBMIT_ARGS): an "
            "application that ends before it starts Spark (printing its --help, or refusing its arguments) ends "
            "without a JVM. With --deploy-mode cluster, or an application that is no .py file, spark-submit runs it."
        ),
    )

    _directory_command(
        commands, "clock", _clock, "print the global minimum checkpoint clock and the task clocks",
        "Prints the global minimum checkpoint clock and each task's clock.",
    )

    status = _directory_command(
        commands, "status", _status, "print recent micro-batches, watermark, clocks, state sizes and dead letters",
        "Prints the last committed micro-batch; per recent batch its rows, rows/s, results, duration and commit "
        "time, late, replayed and dead-lettered records, checkpoints written with their bytes and writing time; "
        "the watermark, the global and per-task clocks with their lag behind wall time and the watermark, and "
        "each task's state size, from the files the job writes under DIR; of a pipeline's directory, every "
        "stage's.",
    )
    status.add_argument(
        "--batches", type=_whole_number("a number of batches", 1), default=10, metavar="N",
        help="recent batches to show (10)",
    )

    inspect = _directory_command(
        commands, "inspect", _inspect, "print the state per key in the checkpoints at a time",
        "Prints the state of every key (and, for windowed states, every window not yet closed) in the tasks' "
        "checkpoints at time T, tab-separated. A checkpoint at T holds the messages with event time before T, "
        "none at or after it: a running job's sink also counts the messages it has read since (up to its "
        "watermark, which `persistent status` shows), so the sink's values may be larger; a note on stderr says "
        "how far the job has read. Checkpoints name their monoid; one defined outside the monoids package needs "
        "--import of its module.",
    )
    inspect.add_argument("--at", type=_time_ms, metavar="T", help="checkpoint time in ms (default: the clock)")
    inspect.add_argument("--key", metavar="K", help="show only key K (compared as text)")
    inspect.add_argument("--task", metavar="NAME", help="show only task NAME (for example group-00003)")
    inspect.add_argument(
        "--import", dest="imports", action="append", default=[], metavar="MODULE",
        help="import MODULE first, for the monoids it defines (repeatable)",
    )
    inspect.add_argument("--raw", action="store_true", help="print the stored monoid values, not the results")

    rewind_ = _directory_command(
        commands, "rewind", _rewind, "prepare a restart from the earlier checkpoint at T (recovery path B)",
        "Checks that T is a clock in the clock's history and that every task of it holds a readable checkpoint "
        "at T (else changes nothing), then deletes DIR/spark, sets the clock to T and deletes the checkpoints "
        "after T. The next start restores every task at T and rewinds the sources to T. Stop the job first: "
        "while a job runs on DIR (holds its lease), rewind is refused, naming it, and while rewind runs, a job "
        "is refused. DIR must be writable: local, file:// or webhdfs://.",
    )
    rewind_.add_argument("--to", type=_time_ms, required=True, metavar="T", help="the clock to rewind to, in ms")
    return p


def _failures() -> tuple[type[BaseException], ...]:
    """The errors a command reports in one line with exit status 1; imported when one
    is raised, so that ``--help`` does not import the state package."""
    from state.errors import StateError

    return StateError, OSError, PersistentError  # PersistentError: JobDirectoryError, SetupError among them


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    submit = argv[:1] == ["run"] and argv[1:2] not in (["-h"], ["--help"])  # spark-submit's options are not ours
    args = None if submit else parser().parse_args(argv)  # help and usage errors exit here
    try:
        code = _run(argv[1:]) if submit else args.handler(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:
        # The reader has read all it wants (| head): end quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except UsageError as exc:
        print(f"persistent: error: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"persistent: error: {exc}", file=sys.stderr)
        return 2
    except _failures() as exc:
        print(f"persistent: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
