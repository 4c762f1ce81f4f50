"""The ``persistent`` command line on job directories written by the real stores
(``conftest.JobWriter``): status, clock, inspect and rewind without Spark, and the
checks ``run`` makes before it starts spark-submit."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from persistent.examples.count import VectorizedCount
from persistent.runtime.recovery import RecoveryPath, plan
from persistent.storage.checkpoint_store import CheckpointStore
from persistent.storage.fs import LocalFileSystem
from persistent.storage.lease import JobLease, holder
from persistent.tools import cli

from jobwriter import JobWriter, SlidingSum, run_cli


def inspected(out: str) -> list[dict[str, str]]:
    """The tab-separated rows ``persistent inspect`` printed, as dicts by header."""
    header, *rows = out.splitlines()
    return [dict(zip(header.split("\t"), row.split("\t"))) for row in rows]


# -- help and bad input -------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["run"], ["clock"], ["status"], ["inspect"], ["rewind"]])
def test_every_command_has_help(capsys, command):
    with pytest.raises(SystemExit) as exited:
        cli.main([*command, "--help"])
    assert exited.value.code == 0 and capsys.readouterr().out.startswith(f"usage: persistent {' '.join(command)}")


ROOT = Path(__file__).resolve().parents[2]


def persistent(*argv, **how) -> subprocess.CompletedProcess:
    """``persistent ARGV`` in a process of its own, run from the checkout."""
    how = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **how}
    return subprocess.run([sys.executable, "-m", "persistent.tools.cli", *map(str, argv)], cwd=ROOT, timeout=120,
                          **how)


def test_help_answers_without_importing_the_state_package_pandas_or_pyspark():
    shown = subprocess.run(
        [sys.executable, "-c", "import sys; from persistent.tools import cli\n"
                               "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
                               "print(sorted(m for m in ('state', 'pandas', 'pyspark', 'numpy') if m in sys.modules))"],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert shown.stdout.startswith("usage: persistent") and shown.stdout.splitlines()[-1] == "[]", shown.stderr
    assert persistent("--help").returncode == 0


def test_the_dir_help_names_the_file_systems_the_readme_names(capsys):
    with pytest.raises(SystemExit):
        cli.main(["status", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    readme = " ".join((ROOT / "README.md").read_text().split())
    for scheme in ("file://", "webhdfs://NAMENODE[:PORT]/PATH", "hdfs://NAMENODE[:PORT]/PATH", "s3a://BUCKET/PATH",
                   "s3://", "gs://BUCKET/PATH"):
        assert scheme in help_text and scheme in readme


@pytest.mark.parametrize("command", [["clock"], ["status"], ["inspect"], ["status", "--batches", "1"]])
def test_a_reader_that_closed_the_pipe_ends_the_command_quietly(counting_job, command):
    read, write = os.pipe()
    os.close(read)  # as `| true` does before the command writes
    try:
        done = persistent(command[0], counting_job.directory.root, *command[1:], stdout=write)
    finally:
        os.close(write)
    assert (done.returncode, quiet(done.stderr.decode())) == (0, "")


def quiet(err: str) -> str:
    """``err`` without the notes of ``persistent inspect``: what is left is an error."""
    return "".join(line for line in err.splitlines(keepends=True) if not line.startswith("note: "))


@pytest.mark.parametrize("command", ["clock", "status", "inspect"])
def test_a_command_piped_into_head_prints_its_first_line_and_ends_quietly(counting_job, command):
    line = f"{sys.executable} -m persistent.tools.cli {command} {counting_job.directory.root}"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", f"{line} | head -1"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    alone = persistent(command, counting_job.directory.root, text=True)
    assert (done.returncode, quiet(done.stderr)) == (0, "")
    assert done.stdout == alone.stdout.splitlines(keepends=True)[0]


def test_a_directory_that_does_not_exist_is_one_line_of_error(capsys, tmp_path):
    code, out, err = run_cli(capsys, "status", tmp_path / "nope")
    assert (code, out) == (1, "")
    assert err == f"persistent: error: {tmp_path / 'nope'} does not exist\n"


def test_a_directory_that_is_no_job_directory_is_refused(capsys, tmp_path):
    (tmp_path / "photos").mkdir()
    code, _, err = run_cli(capsys, "inspect", tmp_path / "photos")
    assert code == 1 and "is not a job's checkpoint directory" in err and len(err.splitlines()) == 1


def test_a_uri_no_file_system_here_serves_is_refused_saying_what_works(capsys):
    code, _, err = run_cli(capsys, "clock", "abfs://jobs@account.dfs.core.windows.net/x")
    assert code == 1 and "abfs://jobs@account.dfs.core.windows.net/x cannot be reached without a JVM" in err
    assert "webhdfs://NAMENODE:9870/PATH, or an s3://, s3a://, gs:// or gcs:// URI" in err


@pytest.mark.parametrize("bad", ["soon", "-5", "1.5"])
def test_a_time_that_is_no_ms_count_is_a_usage_error(capsys, counting_job, bad):
    with pytest.raises(SystemExit) as exited:
        cli.main(["inspect", counting_job.directory.root, "--at", bad])
    assert exited.value.code == 2


# -- clock and status ----------------------------------------------------------------


def test_clock_prints_the_global_and_each_tasks_clock(capsys, counting_job):
    code, out, _ = run_cli(capsys, "clock", counting_job.directory.root)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("clock          400 ms  1970-01-01T00:00:00.400+00:00  (")
    assert [line.split()[:3] for line in lines[1:]] == [[f"group-0000{g}", "400", "ms"] for g in range(3)]


def test_status_reports_batches_watermark_clocks_state_sizes_and_dead_letters(capsys, counting_job):
    code, out, _ = run_cli(capsys, "status", counting_job.directory.root)
    assert code == 0
    lines = out.splitlines()
    assert lines.pop(1) == "running        no job (no live lease)"
    assert lines[1] == "generation     0, started fresh, 3 key groups"
    assert lines[2].startswith("last batch     0.3, committed 2023-11-14T22:13:23.000+00:00 (")
    assert lines[3].startswith("watermark      409 ms  1970-01-01T00:00:00.409+00:00  (")
    assert re.search(r"\(\S+ d behind wall time\)$", lines[3])
    assert lines[4] == ("spark's half   not loaded: every message crosses the shuffle as a row (the job's first "
                        "lines say why)")  # the fixture's commit runs with Spark's watermark
    assert lines[5] == "throughput     150 rows in 1.9 s of processing in the last 4 batch(es): 80 rows/s"
    assert lines[6] == "late           0 in all, 0 in the last 4 batch(es)"
    assert lines[7] == "dead letters   3 in the last 4 batch(es)"
    files = (Path(counting_job.directory.root) / "checkpoints").rglob("*")
    written = sum(f.stat().st_size for f in files if f.is_file())
    assert lines[8] == f"checkpoints    9 written ({written / 1024:.1f} KiB) in the last 4 batch(es)"
    assert lines[9].split() == ["batch", "committed", "rows", "rows/s", "results", "seconds", "commit", "s", "late",
                                "replayed", "dead", "letters", "checkpoints", "checkpoint", "bytes", "checkpoint",
                                "s", "clock"]
    batches = [line.split() for line in lines[10:14]]
    assert [b[:2] for b in batches] == [["0.0", "22:13:20.000"], ["0.1", "22:13:21.000"], ["0.2", "22:13:22.000"],
                                        ["0.3", "22:13:23.000"]]
    # rows, rows/s, seconds, commit s, dead letters, checkpoints, checkpoint s, clock
    assert [(int(b[2]), b[3], b[5], b[6], b[9], b[10], b[13], b[14]) for b in batches] == [
        (50, "100", "0.500", "0.200", "0", "0", "0.000", "-"),  # the first batch's watermark: none due
        (33, "132", "0.250", "0.125", "2", "3", "0.015", "100"),
        (54, "54", "1.000", "0.500", "0", "3", "0.030", "200"),
        (13, "104", "0.125", "0.062", "1", "3", "0.060", "400"),
    ]
    assert sum(int(b[2]) for b in batches) == len(counting_job.sent)
    assert lines[14].startswith("clock          400 ms") and lines[14].endswith(", 9 ms behind the watermark)")
    sizes = {g: len(state.value) for g, state in counting_job.states.items()}
    for g in range(3):
        assert re.fullmatch(rf"  group-0000{g}  400 ms  \S+  state {sizes[g]} B", lines[15 + g])


def test_status_shows_the_figures_a_progress_record_of_an_older_version_lacks_as_dashes(capsys, counting_job):
    path = os.path.join(counting_job.directory.root, "progress", "000000-000000000002.json")
    with open(path) as f:
        record = json.load(f)
    for name in ("checkpoint_seconds", "commit_seconds", "checkpoint_bytes", "checkpoint_crcs", "dead_letters",
                 "late_total"):
        del record[name]
    with open(path, "w") as f:
        json.dump(record, f)
    code, out, _ = run_cli(capsys, "status", counting_job.directory.root)
    last = [line.split() for line in out.splitlines() if line.startswith("  0.2")][0]
    # commit s, dead letters, checkpoints, checkpoint bytes, checkpoint s
    assert code == 0 and (last[6], last[9], last[10], last[11:13], last[13]) == ("-", "0", "3", ["0", "B"], "-")


def test_status_shows_only_the_newest_batches_asked_for(capsys, counting_job):
    _, out, _ = run_cli(capsys, "status", counting_job.directory.root, "--batches", "2")
    assert "67 rows in 1.1 s of processing in the last 2 batch(es): 60 rows/s" in out
    assert [line.split()[0] for line in out.splitlines() if line.startswith("  0.")] == ["0.2", "0.3"]


def test_status_of_a_job_without_progress_says_so_and_still_prints_the_clocks(capsys, counting_job):
    fs = counting_job.directory.fs
    fs.delete(fs.join(counting_job.directory.root, "progress"))
    code, out, _ = run_cli(capsys, "status", counting_job.directory.root)
    assert code == 0
    assert "progress       none yet: the job has not committed a micro-batch" in out
    assert "clock          400 ms" in out and "  group-00002  400 ms" in out and "state" not in out


def test_status_of_a_fresh_job_says_there_is_no_clock(capsys, tmp_path):
    writer = JobWriter(str(tmp_path / "job"), VectorizedCount())
    code, out, _ = run_cli(capsys, "status", writer.directory.root)
    assert code == 0
    assert out.splitlines()[3:] == ["progress       none yet: the job has not committed a micro-batch",
                                    "clock          none yet: no task has checkpointed"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.pop("watermark_ms"), "lacks the field 'watermark_ms'"),
        (lambda r: r.update(rows=True), "field 'rows' must be an int, got True"),
        (lambda r: r.update(seconds="fast"), "field 'seconds' must be a number"),
        (lambda r: r.update(clock_ms=1.5), "field 'clock_ms' must be an int or null"),
        (lambda r: r.update(state_bytes={"group-00000": "big"}), "field 'state_bytes' must be an object"),
    ],
)
def test_a_damaged_progress_file_is_an_error_naming_the_file_and_field(capsys, counting_job, change, message):
    path = os.path.join(counting_job.directory.root, "progress", "000000-000000000002.json")
    with open(path) as f:
        record = json.load(f)
    change(record)
    with open(path, "w") as f:
        json.dump(record, f)
    code, _, err = run_cli(capsys, "status", counting_job.directory.root)
    assert code == 1 and re.search(message, err) and path in err


# -- inspect ---------------------------------------------------------------------------


def test_inspect_prints_each_keys_count_at_the_clock(capsys, counting_job):
    code, out, err = run_cli(capsys, "inspect", counting_job.directory.root)
    assert (code, err) == (0, READ_ON.format(at=400, root=counting_job.directory.root))
    rows = inspected(out)
    assert {r["key"]: int(r["value"]) for r in rows} == counting_job.counts_before(400)
    assert all(r["task"] == f"group-{counting_job.group_of(r['key']):05d}" for r in rows)


#: What inspect notes of the counting job's directory at ``at``: its job has read to watermark 409 ms.
READ_ON = ("note: the state at checkpoint time {at} ms (1970-01-01T00:00:00.{at:03d}+00:00) holds the messages with "
           "event time before {at} ms, none after. The job has read on, to watermark 409 ms (micro-batch 0.3): its "
           "sink's results count those messages too, so they may be larger. Until the next checkpoint they are only "
           "in Spark's state store ({root}/spark); the sink holds the newest values\n")


def test_inspect_says_what_the_state_at_a_checkpoint_holds_and_how_far_the_job_read_on(capsys, counting_job):
    fs, root = counting_job.directory.fs, counting_job.directory.root
    _, _, err = run_cli(capsys, "inspect", root, "--at", 200)
    assert err == READ_ON.format(at=200, root=root)
    fs.delete(fs.join(root, "progress"))  # nothing says the job read on
    _, _, err = run_cli(capsys, "inspect", root)
    assert err == ("note: the state at checkpoint time 400 ms (1970-01-01T00:00:00.400+00:00) holds the messages "
                   "with event time before 400 ms, none after\n")


def test_inspect_help_says_what_a_checkpoint_holds(capsys):
    with pytest.raises(SystemExit):
        cli.main(["inspect", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "A checkpoint at T holds the messages with event time before T, none at or after it" in help_text
    assert "the sink's values may be larger" in help_text


@pytest.mark.parametrize("at", [100, 200])
def test_inspect_at_an_earlier_checkpoint_prints_the_counts_then(capsys, counting_job, at):
    _, out, _ = run_cli(capsys, "inspect", counting_job.directory.root, "--at", at)
    assert {r["key"]: int(r["value"]) for r in inspected(out)} == counting_job.counts_before(at)


def test_inspect_filters_by_key_and_task(capsys, counting_job):
    _, out, _ = run_cli(capsys, "inspect", counting_job.directory.root, "--key", "k3")
    assert inspected(out) == [{"task": "group-00002", "key": "k3", "value": str(counting_job.counts_before(400)["k3"])}]
    _, out, _ = run_cli(capsys, "inspect", counting_job.directory.root, "--task", "group-00001")
    assert {r["key"] for r in inspected(out)} == {"k1", "k5"}


def test_inspect_of_a_key_that_is_not_there_says_so(capsys, counting_job):
    code, out, err = run_cli(capsys, "inspect", counting_job.directory.root, "--key", "nobody")
    assert (code, out) == (0, "") and "no key 'nobody' in the checkpoints at 400 ms of 3 task(s)" in err


def test_inspect_prints_the_open_windows_of_a_windowed_state(capsys, window_job):
    window = SlidingSum.WINDOW
    for at in (200, 400):
        _, out, _ = run_cli(capsys, "inspect", window_job.directory.root, "--at", at)
        got = {(r["key"], int(r["window_start"])): (int(r["window_end"]), int(r["value"])) for r in inspected(out)}
        expected = {(key, start): (start + window.size_ms, total)
                    for (key, start), total in window_job.window_sums_before(at, window).items()
                    if start + window.size_ms > at}
        assert got == expected and got


def test_inspect_raw_prints_the_stored_monoid_value(capsys, tmp_path):
    from monoids import Averaged
    from persistent import PersistentTask
    from state import NonWindowState

    class Mean(PersistentTask):
        def persistent_state(self):
            return NonWindowState(Averaged())

        def process_batch(self, messages):
            return Averaged().prepare_column(messages["value"].to_numpy(dtype=float))

    writer = JobWriter(str(tmp_path / "job"), Mean(), groups=1)
    writer.batch([("x", 10, 1), ("x", 20, 2), ("x", 150, 9)])
    writer.batch([])  # at the watermark 150: the checkpoint at 100
    _, out, _ = run_cli(capsys, "inspect", writer.directory.root, "--key", "x")
    assert inspected(out)[0]["value"] == "1.5"
    _, out, _ = run_cli(capsys, "inspect", writer.directory.root, "--key", "x", "--raw")
    assert inspected(out)[0]["value"] == repr(Averaged().fold(Averaged().prepare_column([1.0, 2.0])))


def test_inspect_at_a_time_some_tasks_lack_shows_the_others_and_notes_them(capsys, counting_job):
    store = CheckpointStore(LocalFileSystem(), counting_job.directory.checkpoints, "group-00001")
    os.unlink(store.path(200))
    code, out, err = run_cli(capsys, "inspect", counting_job.directory.root, "--at", 200)
    assert code == 0 and {r["task"] for r in inspected(out)} == {"group-00000", "group-00002"}
    assert err == ("note: 1 task(s) have no checkpoint at 200 ms and are not shown: group-00001\n"
                   + READ_ON.format(at=200, root=counting_job.directory.root))


def test_inspect_of_one_task_without_that_checkpoint_names_the_times_it_has(capsys, counting_job):
    code, _, err = run_cli(capsys, "inspect", counting_job.directory.root, "--at", 300, "--task", "group-00001")
    assert code == 1 and "task group-00001 has no checkpoint at 300 ms (it holds 100, 200, 400 ms)" in err


def test_inspect_of_an_unknown_task_lists_the_tasks(capsys, counting_job):
    code, _, err = run_cli(capsys, "inspect", counting_job.directory.root, "--task", "group-00009")
    assert code == 1 and "no task 'group-00009' (tasks: group-00000, group-00001, group-00002)" in err


def test_inspect_at_a_time_no_task_has_is_an_error(capsys, counting_job):
    code, _, err = run_cli(capsys, "inspect", counting_job.directory.root, "--at", 300)
    assert code == 1 and "no task of" in err and "has a checkpoint at 300 ms" in err


def test_a_corrupt_checkpoint_is_an_error_naming_the_file(capsys, counting_job):
    path = CheckpointStore(LocalFileSystem(), counting_job.directory.checkpoints, "group-00000").path(400)
    with open(path, "r+b") as f:
        f.seek(-3, os.SEEK_END)
        f.write(b"XYZ")
    code, _, err = run_cli(capsys, "inspect", counting_job.directory.root)
    assert code == 1 and "checksum mismatch" in err and path in err


MODULE = '''
from monoids import Sum


class Tally(Sum):
    name = "test-cli-tally"
'''


def test_a_monoid_defined_outside_the_package_needs_its_module_imported(tmp_path, monkeypatch):
    (tmp_path / "cli_test_monoids.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import cli_test_monoids

    from persistent import PersistentTask
    from state import NonWindowState

    class Tallying(PersistentTask):
        def persistent_state(self):
            return NonWindowState(cli_test_monoids.Tally())

        def process_batch(self, messages):
            return messages["value"].to_numpy(dtype="int64")

    writer = JobWriter(str(tmp_path / "job"), Tallying(), groups=1)
    writer.batch([("x", 10, 1), ("x", 20, 2), ("x", 30, 3), ("x", 150, 4)])
    writer.batch([])  # at the watermark 150: the checkpoint at 100
    command = [sys.executable, "-m", "persistent.tools.cli", "inspect", writer.directory.root]
    alone = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert alone.returncode == 1
    assert "no monoid named 'test-cli-tally' is defined; import the module" in alone.stderr
    imported = subprocess.run([*command, "--import", "cli_test_monoids"], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)
    assert imported.returncode == 0, imported.stderr
    assert inspected(imported.stdout) == [{"task": "group-00000", "key": "x", "value": "6"}]


def test_importing_a_module_that_does_not_exist_is_a_usage_error(capsys, counting_job):
    code, _, err = run_cli(capsys, "inspect", counting_job.directory.root, "--import", "no_such_module_here")
    assert code == 2 and "--import no_such_module_here" in err


# -- rewind ----------------------------------------------------------------------------


def test_rewind_prepares_recovery_path_b_from_the_checkpoints_at_t(capsys, counting_job):
    directory = counting_job.directory
    at_200 = {f"group-{g:05d}": directory.store(g).recover(200) for g in range(3)}
    code, out, _ = run_cli(capsys, "rewind", directory.root, "--to", 200)
    assert code == 0
    first = f"rewound the clock of {directory.root} from 400 ms to 200 ms (1970-01-01T00:00:00.200+00:00)"
    assert out.splitlines()[0] == first
    assert "deleted 3 checkpoint(s) after 200 ms" in out and "recovery path B: it restores 3 task(s)" in out
    assert not os.path.exists(directory.spark)
    record = directory.clock.read()
    assert (record.clock_ms, dict(record.task_clocks)) == (200, dict.fromkeys(at_200, 200))
    assert all(directory.store(g).times() == [100, 200] for g in range(3))
    start = plan(directory, 3)  # what the next start does
    assert (start.path, start.floor_ms, start.generation) == (RecoveryPath.FROM_CLOCK, 200, 1)
    assert {f"group-{g:05d}": directory.restore(g, 200) for g in start.restored} == at_200


def test_rewind_of_a_running_jobs_directory_is_refused_naming_the_job_and_changes_nothing(capsys, counting_job):
    directory = counting_job.directory
    with JobLease.acquire(directory, "Spark application app-1", renew_every_ms=3_600_000) as running:
        before = files(directory.root)
        code, _, err = run_cli(capsys, "rewind", directory.root, "--to", 200)
        assert code == 1
        assert err.startswith(f"persistent: error: cannot rewind while a job runs: {directory.root} is in use by "
                              f"another job: Spark application app-1 on host {running.record.host}, pid {os.getpid()}")
        assert files(directory.root) == before
        _, out, _ = run_cli(capsys, "status", directory.root)
        assert out.splitlines()[1].startswith(f"running        Spark application app-1 on host {running.record.host}, "
                                              f"pid {os.getpid()}, running since ")
    assert run_cli(capsys, "rewind", directory.root, "--to", 200)[0] == 0
    # The rewind held the lease while it ran, and released it.
    assert holder(directory) is None and directory.read_lease(directory.lease_terms()[-1]).holder == "persistent rewind"


def files(root: str) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in Path(root).rglob("*") if p.is_file()}


def test_rewind_refuses_a_time_for_which_a_task_lacks_a_checkpoint_and_changes_nothing(capsys, counting_job):
    directory = counting_job.directory
    os.unlink(directory.store(1).path(200))
    code, out, err = run_cli(capsys, "rewind", directory.root, "--to", 200)
    assert (code, out) == (1, "")
    assert "1 task(s) lack a checkpoint there (group-00001 holds 100, 400 ms)" in err
    assert directory.clock.read().clock_ms == 400 and os.path.exists(directory.spark)
    assert directory.store(0).times() == [100, 200, 400]


def test_rewind_refuses_a_torn_checkpoint(capsys, counting_job):
    path = counting_job.directory.store(2).path(100)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 1)
    code, _, err = run_cli(capsys, "rewind", counting_job.directory.root, "--to", 100)
    assert code == 1 and path in err and "torn write" in err
    assert counting_job.directory.clock.read().clock_ms == 400


def test_rewind_refuses_a_time_that_was_never_the_clock(capsys, counting_job):
    code, _, err = run_cli(capsys, "rewind", counting_job.directory.root, "--to", 300)
    assert code == 1 and "clocks in the history: 100, 200, 400 ms" in err


def test_rewind_repairs_a_corrupt_clock(capsys, counting_job):
    directory = counting_job.directory
    with open(directory.clock.path, "wb") as f:
        f.write(b"garbage")
    code, out, _ = run_cli(capsys, "rewind", directory.root, "--to", 400)
    assert code == 0 and "(it was unreadable) to 400 ms" in out
    assert directory.clock.read().clock_ms == 400


# -- run -------------------------------------------------------------------------------


def test_run_of_an_application_that_does_not_exist_starts_nothing(capsys, monkeypatch, tmp_path):
    started = []
    monkeypatch.setattr(os, "execve", lambda *args: started.append(args))
    code, out, err = run_cli(capsys, "run", "--master", "local[1]", tmp_path / "missing.py", "--total", "5")
    assert (code, out, started) == (2, "", [])
    assert err == (f"persistent: error: application {tmp_path / 'missing.py'} does not exist (or is not a file), "
                   f"nor is it an example (count, demo, pipeline, sessions, window_average, wordcount)\n")


def test_an_application_is_any_local_file_by_its_name_and_a_uri_is_none(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs:count.py").write_text("")  # a colon, as a URI's scheme has
    command, _ = cli.submit_command(["--master", "local[1]", "jobs:count.py"])
    assert command[-1] == "jobs:count.py"
    code, _, err = run_cli(capsys, "run", "--master", "local[1]", "hdfs://namenode/count.py")
    assert code == 2 and "application hdfs://namenode/count.py does not exist (or is not a file)" in err


def test_run_of_an_example_by_name_runs_the_file_of_the_installed_example():
    import persistent.examples

    command, _ = cli.submit_command(["--master", "local[1]", "wordcount", "--help"])
    installed = os.path.join(persistent.examples.__path__[0], "wordcount.py")
    assert command[-4:] == ["--master", "local[1]", installed, "--help"] and os.path.isfile(installed)


@pytest.fixture
def no_jvm(tmp_path) -> dict[str, str]:
    """An environment whose Java and Spark home start no JVM: ``java -version`` answers
    17 and notes it was called in ``java.called``; spark-submit prints its arguments,
    notes it was called in ``spark-submit.called`` and fails, as it does when its JVM
    does not start."""
    bin_dir = tmp_path / "fake" / "bin"
    bin_dir.mkdir(parents=True)
    for name, body in [("java", 'echo \'openjdk version "17.0.9"\' >&2'), ("spark-submit", 'echo "$@"; exit 1')]:
        (bin_dir / name).write_text(f'#!/bin/sh\necho "$0" >> "{tmp_path}/{name}.called"\n{body}\n')
        (bin_dir / name).chmod(0o755)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYSPARK")}
    return {**environment, "JAVA_HOME": str(bin_dir.parent), "SPARK_HOME": str(bin_dir.parent),
            "PYTHONPATH": str(ROOT)}


def called(tmp_path, name: str) -> int:
    marks = tmp_path / f"{name}.called"
    return len(marks.read_text().splitlines()) if marks.exists() else 0


def test_run_of_an_applications_help_prints_it_without_starting_a_jvm(tmp_path, no_jvm):
    done = persistent("run", "--master", "local[1]", ROOT / "examples" / "count.py", "--help", env=no_jvm, text=True)
    assert done.returncode == 0 and done.stdout.startswith("usage: count.py"), done.stderr
    assert "MessageCount: counts per key" in done.stdout and "key k{i % keys}, value i" in done.stdout
    assert (called(tmp_path, "java"), called(tmp_path, "spark-submit")) == (0, 0)


def test_run_refuses_the_applications_bad_arguments_before_a_jvm_starts_and_creates_nothing(tmp_path, no_jvm):
    work = tmp_path / "work"
    work.mkdir()
    (work / "afile").touch()
    done = persistent("run", ROOT / "examples" / "count.py", "--checkpoint", work / "afile", "--output",
                      f"sqlite://{work / 'out.db'}", env=no_jvm, text=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"count.py: error: checkpoint directory {work / 'afile'} is a file, not a directory\n"
    assert (called(tmp_path, "java"), called(tmp_path, "spark-submit")) == (0, 0)
    assert os.listdir(work) == ["afile"]


def test_run_refuses_a_master_that_is_no_master_url_before_the_application_runs(tmp_path, no_jvm):
    done = persistent("run", "--master=spark:/127.0.0.1:7077", ROOT / "examples" / "count.py", "--checkpoint",
                      tmp_path / "ck", "--output", "console", env=no_jvm, text=True)
    assert done.returncode == 2
    assert done.stderr == ("persistent: error: --master 'spark:/127.0.0.1:7077' is not a Spark master: give "
                           "local[N], local[*], spark://HOST:PORT, yarn or k8s://HOST:PORT\n")
    assert (called(tmp_path, "java"), called(tmp_path, "spark-submit")) == (0, 0)


def test_run_of_good_arguments_runs_the_application_once_and_its_session_starts_spark_submit(tmp_path, no_jvm):
    app = ROOT / "examples" / "count.py"
    done = persistent("run", "--master", "local[1]", "--conf", "spark.x=a b", app, "--checkpoint", tmp_path / "ck",
                      "--output", "console", "--total", "5", env=no_jvm, text=True)
    # The application probed Java before it started Spark, once; its session ran spark-submit
    # with the options (which, being a stand-in, started no JVM: the session failed).
    assert (called(tmp_path, "java"), called(tmp_path, "spark-submit")) == (1, 1), done.stderr
    submitted = done.stdout.splitlines()[0]
    assert submitted.startswith("--properties-file ") and submitted.endswith(
        "--master local[1] --conf spark.x=a b pyspark-shell"), submitted
    assert done.returncode != 0 and not (tmp_path / "ck").exists()


def test_run_without_an_application_is_a_usage_error(capsys):
    code, _, err = run_cli(capsys, "run", "--master", "local[1]", "--verbose")
    assert code == 2 and "persistent run needs the application" in err


def test_run_passes_defaults_then_spark_submit_options_then_the_application_and_its_arguments(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    app = os.path.join(os.path.dirname(cli.__file__), os.pardir, os.pardir, "examples", "count.py")
    command, environment = cli.submit_command(
        ["--master", "local[1]", "--verbose", "--conf=spark.x=1", "--conf", "spark.y=2", app, "--total", "5", "-v"]
    )
    spark_submit, _, properties, _, java_options, *rest = command
    assert os.access(spark_submit, os.X_OK) and spark_submit.endswith("/bin/spark-submit")
    assert os.path.isfile(properties) and properties.endswith("conf/spark-defaults.conf")
    assert "spark.ui.enabled" not in open(properties).read()  # jobs serve Spark's web UI
    logging = java_options.removeprefix("spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file://")
    assert os.path.isfile(logging) and "rootLogger.level = warn" in open(logging).read()
    assert rest == ["--master", "local[1]", "--verbose", "--conf=spark.x=1", "--conf", "spark.y=2", app, "--total",
                    "5", "-v"]
    assert environment["PYSPARK_PYTHON"] == sys.executable


def test_run_keeps_a_python_the_caller_chose(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/python/bin/python3")
    _, environment = cli.submit_command([cli.__file__])
    assert environment["PYSPARK_PYTHON"] == "/opt/python/bin/python3"


def test_the_job_the_rewind_tests_stand_on_has_three_clocks_in_its_history(counting_job):
    assert [r.clock_ms for r in counting_job.directory.clock.history()] == [100, 200, 400]
