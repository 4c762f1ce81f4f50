"""The Spark a job runs on: the supported minor versions, said once in the runtime and
agreeing with setup.cfg's range, the jars the build makes and the environment check;
a session of another Spark, or a Spark Connect session, is refused at the job's start
before anything is written."""

from __future__ import annotations

import configparser
import importlib.util
import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from persistent import GeneratorSource, Job, SQLiteSink
from persistent.examples.count import VectorizedCount
from persistent.runtime.fold import JARS, jar_of
from persistent.runtime.spark import PYSPARK, SPARK_MINORS, UnsupportedSparkError, check_spark
from persistent.tools.environment import DEPENDENCIES

ROOT = Path(__file__).resolve().parents[2]


def _build():
    spec = importlib.util.spec_from_file_location("build_jars", ROOT / "build_jars.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_supported_minors_are_the_range_of_setup_cfg_and_the_jars_the_build_makes():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    (pyspark,) = [line for line in config["options"]["install_requires"].split() if line.startswith("pyspark")]
    assert pyspark == DEPENDENCIES["pyspark"] == PYSPARK == "pyspark>=4.0,<4.3"
    assert _build().minors() == list(SPARK_MINORS)
    assert [jar_of(f"{minor}.9") for minor in SPARK_MINORS] == _build().build()  # built, or up to date


def test_what_the_halves_of_the_fold_agree_on_is_defined_once_and_written_into_wire_scala():
    from persistent.runtime import fold_wire

    constants = {name: value for name, value in vars(fold_wire).items() if name.isupper()}
    assert set(constants) >= {"WATERMARK_PROPERTY", "FOLD_PROPERTY", "PASS", "COUNT", "SUM", "MAX", "MIN"}
    written = _build().wire().read_text()
    assert [f'val {name} = "{value}"' in written for name, value in constants.items()] == [True] * len(constants)
    fold = (JARS / "Fold.scala").read_text()
    assert [value for value in constants.values() if f'"{value}"' in fold] == []


class _Session:
    """A classic session's one attribute the check reads: its Spark version."""

    def __init__(self, version: str):
        self.version = version


@pytest.mark.parametrize("version", ["3.5.6", "4.3.0"])
def test_a_job_on_a_spark_outside_the_range_is_refused_at_its_start_in_one_line(tmp_path, version):
    job = Job(VectorizedCount(), GeneratorSource(), SQLiteSink(str(tmp_path / "o.db")), str(tmp_path / "ck"))
    with pytest.raises(UnsupportedSparkError) as refused:
        job.start(_Session(version))
    assert str(refused.value) == f"Job: Spark {version} is not supported: jobs run on Spark 4.0 to 4.2 (pyspark>=4.0,<4.3)"
    assert not (tmp_path / "ck").exists() and not (tmp_path / "o.db").exists()


@pytest.mark.parametrize("version, pyarrow", [("4.0.0", "25.0.1"), ("4.1.1", "25.0.1"), ("4.2.0", "26.0.1"),
                                              ("4.2.1", "26.0.1")])
def test_a_classic_session_of_a_supported_minor_passes(version, pyarrow):
    check_spark(_Session(version), pyarrow)


@pytest.mark.parametrize("version", ["4.0.0", "4.1.1"])
def test_spark_before_4_2_with_pyarrow_26_is_refused_naming_the_pyarrow_it_needs(version):
    with pytest.raises(UnsupportedSparkError) as refused:
        check_spark(_Session(version), "26.0.1")
    assert str(refused.value) == (
        f"Job: Spark {version}'s applyInPandasWithState fails with pyarrow 26.0.1 (it slices Arrow batches at "
        f"offsets held as floats, which pyarrow 26 refuses): install pyarrow<26 beside it")


def test_a_spark_connect_session_is_refused_at_its_start_saying_what_it_lacks(tmp_path, monkeypatch):
    # A real Connect client's session; no server listens there, and the check asks it nothing.
    # Its builder marks the process as a Connect client; the mark goes with the test.
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    remote = SparkSession.builder.remote("sc://127.0.0.1:9").getOrCreate()
    try:
        job = Job(VectorizedCount(), GeneratorSource(), SQLiteSink(str(tmp_path / "o.db")), str(tmp_path / "ck"))
        with pytest.raises(UnsupportedSparkError) as refused:
            job.start(remote)
    finally:
        remote.client.close()
    assert len(str(refused.value).splitlines()) == 1
    assert re.match(r"Job: a Spark Connect session cannot run a job: its commit needs the driver's SparkContext",
                    str(refused.value))
    assert not (tmp_path / "ck").exists()
