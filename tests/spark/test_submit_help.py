"""Every example answers ``spark-submit examples/NAME.py --help`` (argparse runs before Spark starts)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.spark.conftest import EXAMPLES

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("example", ["count", "wordcount", "window_average", "sessions"])
def test_spark_submit_help(spark_lock, example):
    from pyspark.find_spark_home import _find_spark_home

    submit = os.path.join(_find_spark_home(), "bin", "spark-submit")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([submit, os.path.join(EXAMPLES, f"{example}.py"), "--help"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ") and "--checkpoint" in done.stdout
