"""A SparkSession with the project's defaults (``conf/spark-defaults.conf``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from persistent.environment import check_java

__all__ = ["spark_session", "DEFAULTS_FILE"]

DEFAULTS_FILE = Path(__file__).resolve().parent.parent / "conf" / "spark-defaults.conf"


def _defaults() -> dict[str, str]:
    settings = {}
    if DEFAULTS_FILE.exists():
        for line in DEFAULTS_FILE.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition(" ")
                settings[key] = value.strip()
    return settings


def spark_session(app_name: str, master: str | None = None, **settings: str):
    """A SparkSession for a job; ``master`` defaults to ``$PERSISTENT_MASTER`` or
    ``local[2]``, unless the job runs under spark-submit, which sets its own.

    Executors run this interpreter (``PYSPARK_PYTHON``) so they find pandas and pyarrow.
    """
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for key, value in {**_defaults(), **settings}.items():
        builder = builder.config(key, value)
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # spark-submit sets the master itself
        builder = builder.master(os.environ.get("PERSISTENT_MASTER", "local[2]"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("PERSISTENT_LOG_LEVEL", "WARN"))
    return spark
