"""The project's session settings reach Spark, under spark-submit too, where what
spark-submit was given wins over the project's defaults."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark

APP = """
from persistent.tools.session import spark_session
conf = spark_session("settings").sparkContext.getConf()
print(*(conf.get(key) for key in ("spark.sql.shuffle.partitions", "spark.buffer.pageSize",
                                  "spark.ui.showConsoleProgress")))
"""


def test_memory_pages_fit_in_half_a_g1_region_of_the_executors_heap(spark):
    # The test session's executors have 768 MiB: G1 regions of 1 MiB.
    assert spark.sparkContext.getConf().get("spark.buffer.pageSize") == "511k"


def _submit(tmp_path, *options: str) -> list[str]:
    from pyspark.find_spark_home import _find_spark_home

    app = tmp_path / "settings.py"
    app.write_text(APP)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([os.path.join(_find_spark_home(), "bin", "spark-submit"), "--master", "local[1]",
                           *options, str(app)], capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def test_spark_submits_settings_win_over_the_projects_defaults_which_fill_the_gaps(spark_lock, tmp_path):
    got = _submit(tmp_path, "--conf", "spark.sql.shuffle.partitions=9", "--conf", "spark.buffer.pageSize=8m")
    assert got == ["9", "8m", "false"]


def test_under_spark_submit_the_pages_fit_the_heap_the_driver_got(spark_lock, tmp_path):
    # 3 GiB: G1 regions of 2 MiB.
    assert _submit(tmp_path, "--driver-memory", "3g") == ["4", "1023k", "false"]


def test_the_tests_python_workers_import_the_installed_pyspark_not_sparks_zip_of_it(spark):
    # conftest.PYTHON_PATH: compiling pyspark from the zip cost every Python process 0.6 s.
    files = spark.sparkContext.parallelize(range(2), 2).map(lambda _: __import__("pyspark").__file__).collect()
    assert all(".zip" not in file for file in files), files


def test_sparks_checkpoint_goes_through_hadoops_file_system_api_on_a_local_disk_only(spark, tmp_path, hdfs_dir):
    # FileContext's renames start a readlink process per file on a local disk; on HDFS
    # only FileContext replaces a file in one rename, as Spark's state store needs.
    from persistent.runtime.planner import _on_local_disk

    assert _on_local_disk(spark, str(tmp_path)) and _on_local_disk(spark, f"file://{tmp_path}")
    assert not _on_local_disk(spark, hdfs_dir.uri)
