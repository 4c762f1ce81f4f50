"""Every error of ``persistent`` is a ``PersistentError`` and the builtin callers catch;
the errors that carry data keep it across processes."""

import pickle

import pytest

from persistent import BadRecord, BadRecordError, InputFileChangedError, PersistentError, TaskDefinitionError
from persistent.core.errors import ConfigError, InputError, JobDirectoryError, RestartRefusedError, SetupError
from persistent.sources.generator import GeneratorSource
from persistent.storage.filesystems import UnsupportedFileSystemError, filesystem_for
from persistent.tools.cli import UsageError
from persistent.tools.environment import EnvironmentProblem


@pytest.mark.parametrize("error, builtin", [
    (ConfigError, ValueError), (RestartRefusedError, ValueError), (JobDirectoryError, ValueError),
    (InputError, ValueError), (BadRecordError, ValueError), (InputFileChangedError, ValueError),
    (UnsupportedFileSystemError, ValueError), (TaskDefinitionError, TypeError), (SetupError, RuntimeError),
    (EnvironmentProblem, RuntimeError), (UsageError, Exception),
])
def test_each_error_has_the_root_and_its_builtin(error, builtin):
    assert issubclass(error, PersistentError) and issubclass(error, builtin)


def test_a_bad_setting_is_a_config_error():
    with pytest.raises(ConfigError, match="keys must be > 0"):
        GeneratorSource(keys=0)
    with pytest.raises(ConfigError):
        filesystem_for("ftp://host/job")


@pytest.mark.parametrize("make, fields", [
    (lambda: InputFileChangedError("in/a.txt", "files source: in/a.txt changed"), ("path",)),
    (lambda: BadRecordError(BadRecord("in/a.jsonl line 2", "{", "not JSON"), "micro-batch 0.4"), ("record", "where")),
])
def test_an_error_keeps_its_fields_message_and_notes_through_pickling(make, fields):
    error = make()  # anew in each run of the tests in one process: the note would stay on a shared one
    error.add_note("what to do")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error) and again.__notes__ == ["what to do"]
    assert [getattr(again, name) for name in fields] == [getattr(error, name) for name in fields]
