"""The environment check ends in one sentence saying what to install."""

from __future__ import annotations

import stat

import pytest

from persistent.tools import environment


def fake_java(tmp_path, version_line: str) -> str:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return str(home)


def test_a_java_too_old_for_spark_names_the_version_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", fake_java(tmp_path, 'openjdk version "11.0.2" 2019-01-15'))
    with pytest.raises(environment.EnvironmentProblem, match="Java 11 .* too old .* install Java 17"):
        environment.check_java()


def test_an_old_style_java_version_is_read_as_its_major_version(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", fake_java(tmp_path, 'java version "1.8.0_292"'))
    with pytest.raises(environment.EnvironmentProblem, match="Java 8 "):
        environment.check_java()


def test_a_missing_java_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(environment.EnvironmentProblem, match="Java was not found: install"):
        environment.check_java()


def test_a_missing_python_dependency_is_named_with_its_install_command(monkeypatch):
    monkeypatch.setitem(environment.DEPENDENCIES, "no_such_module_here", "no-such-package")
    with pytest.raises(environment.EnvironmentProblem, match="'no_such_module_here' is missing"):
        environment.check_dependencies()


def test_the_command_prints_one_line_and_exits_1(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert environment.main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: Java was not found") and err.count("\n") == 1
