"""Crash points (``persistent.storage.faults``): inert without ``PERSISTENT_CRASH_POINT``,
waiting at exactly the arrival it names, and a clear error for a value that names no
point, which would otherwise never crash."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from persistent.storage import faults
from persistent.core.errors import ConfigError
from persistent.storage.faults import CrashPoint, crash_point


class Waiting(Exception):
    """Raised in place of the endless wait, to end it."""


def wait(seconds: float):
    raise Waiting


@pytest.fixture
def armed(monkeypatch, tmp_path):
    """Sets ``PERSISTENT_CRASH_POINT`` to ``NAME:N:FILE`` with a fresh count of arrivals;
    returns FILE."""
    monkeypatch.setattr(faults, "_arrivals", {})
    monkeypatch.setattr(faults, "time", SimpleNamespace(sleep=wait))
    marker = tmp_path / "waiting"

    def arm(value: str):
        monkeypatch.setenv("PERSISTENT_CRASH_POINT", value.replace("FILE", str(marker)))
        return marker

    return arm


def test_without_the_variable_no_point_waits(monkeypatch):
    monkeypatch.delenv("PERSISTENT_CRASH_POINT", raising=False)
    for point in CrashPoint:
        crash_point(point)


def test_the_nth_arrival_at_the_named_point_writes_its_process_id_and_waits(armed):
    marker = armed("group:2:FILE")
    crash_point(CrashPoint.BATCH)
    crash_point(CrashPoint.GROUP)
    assert not marker.exists()
    with pytest.raises(Waiting):
        crash_point(CrashPoint.GROUP)
    assert marker.read_text() == str(os.getpid())


def test_a_point_is_written_as_its_name():
    assert [str(point) for point in CrashPoint] == ["checkpoints", "group", "batch", "sink", "clock", "committed"]
    assert f"{CrashPoint.SINK}:2:f" == "sink:2:f" and CrashPoint("sink") is CrashPoint.SINK


def test_a_name_that_is_no_crash_point_is_refused_naming_the_points(armed):
    marker = armed("grup:1:FILE")
    with pytest.raises(ConfigError, match="PERSISTENT_CRASH_POINT") as refused:
        crash_point(CrashPoint.GROUP)
    assert "'grup'" in str(refused.value) and all(repr(point.value) in str(refused.value) for point in CrashPoint)
    assert not marker.exists()


@pytest.mark.parametrize("value", ["group", "group:FILE", "group:0:FILE", "group:x:FILE", "group:1:"])
def test_a_value_of_another_shape_is_refused(armed, value):
    armed(value)
    with pytest.raises(ConfigError, match="PERSISTENT_CRASH_POINT must be NAME:N:FILE"):
        crash_point(CrashPoint.BATCH)


def test_a_value_from_a_file_is_read_at_each_arrival_and_an_empty_file_names_no_point(armed, tmp_path):
    spec = tmp_path / "spec"
    spec.write_text("")
    marker = armed(f"@{spec}")
    crash_point(CrashPoint.SINK)
    spec.write_text(f"sink:1:{marker}\n")
    with pytest.raises(Waiting):
        crash_point(CrashPoint.SINK)
    assert marker.read_text() == str(os.getpid())


def test_a_value_from_a_file_that_cannot_be_read_is_an_error_naming_it(armed, tmp_path):
    armed(f"@{tmp_path / 'missing'}")
    with pytest.raises(ConfigError, match="PERSISTENT_CRASH_POINT=@.*missing: cannot read the file"):
        crash_point(CrashPoint.CLOCK)
