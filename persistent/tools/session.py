"""A SparkSession with the project's defaults (``persistent/conf/spark-defaults.conf``),
and where they are: inside the package, so an installed wheel carries them."""

from __future__ import annotations

import os
import sys
from importlib.resources import files

from persistent.tools.environment import check_java

__all__ = ["spark_session", "CONF_DIR", "DEFAULTS_FILE", "LOGGING_FILE"]

#: The project's configuration directory, package data of ``persistent``: a directory,
#: or a place inside the zip of the packages shipped with ``--py-files``.
CONF_DIR = files("persistent") / "conf"
#: Spark properties for every job.
DEFAULTS_FILE = CONF_DIR / "spark-defaults.conf"
#: The driver's log4j2 configuration for ``persistent run``: warnings and errors only.
LOGGING_FILE = CONF_DIR / "log4j2.properties"


def _defaults() -> dict[str, str]:
    settings = {}
    for line in DEFAULTS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            settings[key] = value.strip()
    return settings


def _submitted_settings() -> set[str]:
    """Keys that spark-submit set (it passes them to the driver as system properties)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return set()
    from pyspark import SparkConf

    return {key for key, _ in SparkConf().getAll()}


def spark_session(app_name: str, master: str | None = None, **settings: str):
    """A SparkSession for a job; ``master`` defaults to ``$PERSISTENT_MASTER`` or
    ``local[2]``, unless the job runs under spark-submit, which sets its own.

    Executors run this interpreter (``PYSPARK_PYTHON``) so they find pandas and pyarrow.
    """
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    # spark-submit's --conf and --properties-file come first; the defaults only fill gaps.
    submitted = _submitted_settings()
    defaults = {key: value for key, value in _defaults().items() if key not in submitted}
    for key, value in {**defaults, **settings}.items():
        builder = builder.config(key, value)
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # spark-submit sets the master itself
        builder = builder.master(os.environ.get("PERSISTENT_MASTER", "local[2]"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("PERSISTENT_LOG_LEVEL", "WARN"))
    return spark
