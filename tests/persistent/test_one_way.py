"""The paths through start, inspection and recovery each go one way: while one runs,
the chain of the project's modules on the call stack (``monoids``, ``state``,
``persistent``) never returns to a module it has left. ``one_way`` watches every call
and fails naming each chain that went back, frame by frame with file and line.

A module's consecutive frames are one visit; frames of other code (the standard
library, pandas, pyarrow, these tests, the example applications of
``persistent.examples``) are skipped, so a framework calling a user's task or
``build_job`` that calls the framework again is not going back. A lambda or a
generator of a module called or resumed from another is that module's code running
again, and counts as a visit.

Start is covered as far as it runs without Spark: an application's ``run_app`` up to
the refusal of its preflight check, ``persistent run`` up to its check of
``--master``, making ``Job`` (``Plan.of``) and ``Job.start`` on a session stand-in
up to its first use of Spark (the Spark version check, the directory's lease, the
metrics server, a rescale's check and the failing records); planning recovery inside
``Job.start`` and building and starting the query need Spark and are left to
``tests/spark``. Recovery is ``recovery.plan`` and ``delivery.plan`` as ``Job.start``
calls them, on the directories ``jobwriter.JobWriter`` writes as the runtime does.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from jobwriter import SlidingSum, run_cli
from persistent import FilesSource, GeneratorSource, Job, KeyGroup, SQLiteSink
from persistent.core.errors import ConfigError
from persistent.examples.count import VectorizedCount
from persistent.runtime import delivery, recovery
from persistent.runtime.delivery import Delivery
from persistent.runtime.recovery import RecoveryPath
from persistent.runtime.spark import SPARK_MINORS
from persistent.storage.filesystems import JobStorage
from persistent.storage.fs import LocalFileSystem
from persistent.storage.job_directory import JobDirectory
from persistent.tools import options, session
from persistent.tools.inspection import open_job, open_pipeline, read_state, rewind, task_names, times_held
from persistent.tools.preflight import check_job
from state.table_format import describe

OURS = ("monoids", "state", "persistent")
#: Application code inside the ``persistent`` namespace: the installed examples.
APPLICATIONS = ("persistent.examples",)
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Step:
    """One frame of the project's code on the stack."""

    module: str
    function: str
    file: str
    line: int

    def __str__(self) -> str:
        path = Path(self.file)
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        return f"{self.module}  {self.function}  {where}:{self.line}"


def _ours(module: str | None, packages: tuple[str, ...]) -> bool:
    if not module or module.partition(".")[0] not in packages:
        return False
    return not any(module == app or module.startswith(f"{app}.") for app in APPLICATIONS)


def _steps(frame, packages: tuple[str, ...]) -> list[Step]:
    """The project's frames from the outermost to ``frame``."""
    steps = []
    while frame is not None:
        module = frame.f_globals.get("__name__")
        if _ours(module, packages):
            code = frame.f_code
            steps.append(Step(module, code.co_qualname, code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return steps[::-1]


def went_back(steps: list[Step]) -> list[Step]:
    """The steps up to the first that returns to a module the chain had left (none: one way)."""
    left: set[str] = set()
    for i, step in enumerate(steps[1:], 1):
        if step.module != steps[i - 1].module:
            left.add(steps[i - 1].module)
            if step.module in left:
                return steps[: i + 1]
    return []


@contextlib.contextmanager
def one_way(packages: tuple[str, ...] = OURS):
    """Fails unless every call of the block, in its thread and the threads it starts,
    goes one way through the modules of ``packages`` (see the module docstring)."""
    chains: dict[tuple[tuple[str, str], ...], list[Step]] = {}

    def watch(frame, event, arg):
        if event == "call" and _ours(frame.f_globals.get("__name__"), packages):
            back = went_back(_steps(frame, packages))
            if back:
                visits = (step for i, step in enumerate(back) if i == 0 or back[i - 1].module != step.module)
                chains.setdefault(tuple((step.module, step.function) for step in visits), back)

    before, threads_before = sys.getprofile(), threading.getprofile()
    sys.setprofile(watch)
    threading.setprofile(watch)
    try:
        yield
    finally:
        sys.setprofile(before)
        threading.setprofile(threads_before)
    if chains:
        shown = "\n\n".join("\n".join(f"  {step}" for step in steps) for steps in chains.values())
        pytest.fail(f"{len(chains)} chain(s) went back to a module they had left:\n\n{shown}", pytrace=False)


# -- the check itself -------------------------------------------------------------------------

PROBE = {
    "__init__.py": "",
    "a.py": "from . import b\n\n"
            "def there_and_back():\n    return b.call_back()\n\n"
            "def straight_on():\n    return b.pass_on()\n\n"
            "def answer():\n    return 42\n",
    "b.py": "from . import c\n\n"
            "def call_back():\n    from . import a\n    return a.answer()\n\n"
            "def pass_on():\n    return c.answer()\n\n"
            "def hand_to(callback):\n    return callback()\n",
    "c.py": "def answer():\n    return 42\n",
}


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """Modules ``one_way_probe.a``, ``.b`` and ``.c``: a calls b, which calls a back or
    calls c; b also calls what it is handed."""
    (tmp_path / "one_way_probe").mkdir()
    for name, text in PROBE.items():
        (tmp_path / "one_way_probe" / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("one_way_probe.a")
    for name in [name for name in sys.modules if name.partition(".")[0] == "one_way_probe"]:
        del sys.modules[name]


def test_a_module_called_back_by_one_it_called_fails_the_check_naming_each_step(probe):
    with pytest.raises(pytest.fail.Exception) as failed:
        with one_way(("one_way_probe",)):
            assert probe.there_and_back() == 42
    message = str(failed.value)
    assert "1 chain(s) went back" in message
    assert [line.split()[:2] for line in message.splitlines()[2:]] == [
        ["one_way_probe.a", "there_and_back"], ["one_way_probe.b", "call_back"], ["one_way_probe.a", "answer"]]
    assert "one_way_probe/b.py:5" in message


def test_a_module_calling_on_to_a_third_passes_the_check(probe):
    with one_way(("one_way_probe",)):
        assert probe.straight_on() == 42


def test_code_outside_the_packages_is_skipped_so_a_callback_through_it_is_one_visit(probe):
    b = sys.modules["one_way_probe.b"]
    with one_way(("one_way_probe",)):
        assert b.hand_to(lambda: b.pass_on()) == 42
    with pytest.raises(pytest.fail.Exception):
        with one_way(("one_way_probe",)):
            (lambda: probe.there_and_back())()


# -- inspection -------------------------------------------------------------------------------


@pytest.mark.parametrize("job", ["counting_job", "window_job"])
def test_inspection_reads_the_tasks_their_times_and_state_one_way(request, job):
    root = request.getfixturevalue(job).directory.root
    with one_way():
        directory = open_job(root)
        names = task_names(directory)
        held = times_held(directory, names)
        rows = list(read_state(directory, 400, names))
        assert open_pipeline(root) == []
    assert names and all(400 in times for times in held.values()) and rows


def test_a_rewind_goes_one_way(counting_job):
    directory = open_job(counting_job.directory.root)
    with one_way():
        done = rewind(directory, 200)
    assert (done.to_ms, done.deleted_spark) == (200, True)


def test_the_inspection_commands_go_one_way(capsys, counting_job):
    root = counting_job.directory.root
    with one_way():
        outcomes = [run_cli(capsys, *argv)[0] for argv in (
            ["clock", root], ["status", root], ["inspect", root], ["inspect", root, "--at", 200, "--key", "k3"],
            ["inspect", root, "--task", "group-00009"], ["rewind", root, "--to", 100], ["rewind", root, "--to", 7],
        )]
    assert outcomes == [0, 0, 0, 0, 1, 0, 1]


# -- recovery ---------------------------------------------------------------------------------


def plans(directory: JobDirectory, delivered: Delivery = Delivery.EXACTLY_ONCE, key_groups: int = 3):
    """``delivery.plan`` as ``Job.start`` calls it, for a job like ``JobWriter``'s."""
    spec = VectorizedCount().state_spec()
    state = describe(spec.monoid, 100, spec.window, spec.ttl_ms)
    return delivery.plan(delivered, directory, key_groups, 8, state, None, 2)


def test_a_fresh_start_plans_one_way(tmp_path):
    with one_way():
        fresh = [plans(JobDirectory(LocalFileSystem(), str(tmp_path / d.value)), d) for d in Delivery]
        again = plans(JobDirectory(LocalFileSystem(), str(tmp_path / "at-most-once")), Delivery.AT_MOST_ONCE)
        alone = recovery.plan(JobDirectory(LocalFileSystem(), str(tmp_path / "alone")), None, 8)
    assert {start.path for start in [*fresh, alone]} == {RecoveryPath.FRESH}
    assert again.path is RecoveryPath.AFTER_POSITION


def test_continuing_sparks_checkpoint_and_restoring_from_the_clock_plan_one_way(counting_job):
    directory = counting_job.directory
    with one_way():
        same = plans(directory)
        directory.fs.delete(directory.spark)
        restored = plans(directory)
    assert (same.path, restored.path, restored.floor_ms) == (RecoveryPath.SAME_CHECKPOINT, RecoveryPath.FROM_CLOCK, 400)


def test_key_groups_restored_from_the_clock_read_their_checkpoints_one_way(counting_job):
    directory = counting_job.directory
    directory.fs.delete(directory.spark)
    start = plans(directory)
    with one_way():
        on_executors = JobStorage(directory.root).directory()
        groups = [KeyGroup.recover(counting_job.task, 100, on_executors.restore(group, start.floor_ms))
                  for group in sorted(start.restored)]
    assert len(groups) == 3 and {group.floor_ms for group in groups} == {400}


def test_a_refused_restart_plans_one_way(counting_job):
    directory = counting_job.directory
    directory.fs.delete(directory.spark)
    directory.store(1).delete_after(200)
    with one_way():
        for refused in (lambda: plans(directory, key_groups=4), lambda: plans(directory, Delivery.AT_LEAST_ONCE),
                        lambda: plans(directory)):
            with pytest.raises(Exception, match=str(directory.root)):
                refused()


# -- start ------------------------------------------------------------------------------------


class NeedsSpark(Exception):
    """What the session stand-in raises where a start needs Spark itself."""


class Context:
    applicationId = "app-one-way"
    appName = "one-way"

    @property
    def defaultParallelism(self) -> int:
        raise NeedsSpark("defaultParallelism")


class SessionStandIn:
    """A classic session to ``Job.start`` until it asks Spark for something."""

    version = f"{SPARK_MINORS[-1]}.0"
    sparkContext = Context()


class Sums(SlidingSum):
    """``SlidingSum`` of this module, the one a start ships by value to the executors."""


@pytest.fixture
def job(tmp_path, free_port) -> Job:
    (tmp_path / "in").mkdir()
    return Job(Sums(), FilesSource(str(tmp_path / "in")), SQLiteSink(str(tmp_path / "o.db")),
               str(tmp_path / "ck"), checkpoint_interval_ms=100, key_groups=3, metrics_port=free_port())


def test_making_a_job_and_checking_it_go_one_way(job):
    with one_way():
        made = [replace(job, delivery=d, metrics_port=None) for d in Delivery]
        made.append(Job(VectorizedCount(), GeneratorSource(), job.sink, job.checkpoint_dir))
        for each in [job, *made]:
            check_job(each, "local[2]")
        with pytest.raises(ConfigError, match="--master"):
            check_job(job, "nowhere")
    assert [each.plan.checkpoints for each in made] == [False, False, True, True]


def test_a_start_goes_one_way_until_it_needs_spark(job):
    with one_way():
        with pytest.raises(NeedsSpark):
            job.start(SessionStandIn())
    assert LocalFileSystem().exists(job.checkpoint_dir)


def test_an_applications_start_goes_one_way_to_its_preflight_refusal(monkeypatch, job, capsys):
    monkeypatch.delenv("PERSISTENT_STANDBY", raising=False)
    monkeypatch.setattr(session, "spark_session", lambda *args: pytest.fail("the refused start built a session"))
    parser = argparse.ArgumentParser(prog="app")
    options.add_job_options(parser)

    def build_job(args) -> Job:
        return Job(Sums(), job.source, **options.job_settings(args, "sums", "key", "total"))

    argv = ["--checkpoint", job.checkpoint_dir, "--output", f"sqlite://{job.sink.database}", "--master", "nowhere"]
    with one_way():
        with pytest.raises(SystemExit) as ended:
            options.run_app(parser, build_job, "app", argv)
    assert ended.value.code == 2 and "--master 'nowhere'" in capsys.readouterr().err


def test_persistent_run_goes_one_way_to_its_refusal_of_the_master(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(os, "execve", lambda *args: pytest.fail("the refused run executed"))
    app = tmp_path / "app.py"
    app.write_text("")
    with one_way():
        code, _, err = run_cli(capsys, "run", "--master", "nowhere", app, "--flag")
    assert code == 2 and "--master 'nowhere'" in err
