"""Every error of ``state`` is a ``StateError`` and the builtin callers catch."""

import pickle

import pytest

from state import errors


@pytest.mark.parametrize("name", [name for name in errors.__all__ if name != "StateError"])
def test_each_error_has_the_root_and_a_builtin(name):
    error = getattr(errors, name)
    assert issubclass(error, errors.StateError) and issubclass(error, (ValueError, TypeError, OSError))


def test_wrong_input_is_a_value_or_type_error_and_storage_is_an_os_error():
    assert issubclass(errors.StateValueError, ValueError) and issubclass(errors.StateTypeError, TypeError)
    assert issubclass(errors.CheckpointError, OSError)


def test_a_missing_checkpoint_names_its_task_and_time_also_after_pickling():
    error = errors.MissingCheckpointError("group-00001", 2000, "task 'group-00001' has no checkpoint at 2000 ms")
    error.add_note("rewind to 1000 ms")
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), again.task, again.timestamp_ms, str(again)) == (type(error), "group-00001", 2000, str(error))
    assert again.__notes__ == ["rewind to 1000 ms"]
