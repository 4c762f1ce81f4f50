"""Every error of ``state`` is a ``StateError`` and the builtin callers catch."""

import pytest

from state import errors


@pytest.mark.parametrize("name", [name for name in errors.__all__ if name != "StateError"])
def test_each_error_has_the_root_and_a_builtin(name):
    error = getattr(errors, name)
    assert issubclass(error, errors.StateError) and issubclass(error, (ValueError, TypeError, OSError))


def test_wrong_input_is_a_value_or_type_error_and_storage_is_an_os_error():
    assert issubclass(errors.StateValueError, ValueError) and issubclass(errors.StateTypeError, TypeError)
    assert issubclass(errors.CheckpointError, OSError)
