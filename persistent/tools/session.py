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


def _submitted_settings() -> dict[str, str]:
    """What spark-submit set (it passes them to the driver as system properties)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return {}
    from pyspark import SparkConf

    return dict(SparkConf().getAll())


#: Heap size units of Spark's memory settings (``spark.driver.memory``: a bare number is MiB).
_UNITS = {"": 2**20, "b": 1, "k": 2**10, "kb": 2**10, "m": 2**20, "mb": 2**20, "g": 2**30, "gb": 2**30,
          "t": 2**40, "tb": 2**40, "p": 2**50, "pb": 2**50}


def _bytes(memory: str) -> int | None:
    """The bytes of a Spark memory setting (``"6g"``, ``"1024m"``, ``"512"``), None if
    it is not one (Spark says what is wrong with it)."""
    number = memory.strip().lower().rstrip("bkmgtp")
    unit = memory.strip().lower()[len(number):]
    return int(number) * _UNITS[unit] if number.isdigit() and unit in _UNITS else None


def _g1_region_bytes(heap_bytes: int) -> int:
    """The heap region size the JVM's G1 collector picks for a heap of ``heap_bytes``
    (JDK 17's ergonomics): about 2,048 regions, a power of two from 1 to 32 MiB."""
    target = max(heap_bytes // 2048, 2**20)
    return min(1 << (target - 1).bit_length(), 2**25)


def _page_size(settings: dict[str, str], master: str) -> str:
    """``spark.buffer.pageSize`` for tasks on the heap ``settings`` give them (the
    driver's under a ``local`` master, else the executors'): just under half a G1
    region, so a page is not a humongous object.

    Spark sizes its memory pages (hash aggregation, sorts, Arrow buffers of Python UDFs)
    from the heap and the cores, up to 64 MiB: 64 MiB on a 6 GiB heap with 2 cores,
    32 MiB for a 1 GiB executor with one. G1 allocates an object of half a region or
    more as humongous, straight into the old generation, and each such allocation may
    start a concurrent marking cycle: a micro-batch with a few of them spends seconds of
    CPU marking a heap that is mostly young garbage. Pages this size keep the work in the
    young generation. A task may hold 8,192 pages: with a page of about 1/4,096 of the
    heap, more than the heap (on heaps of 64 GiB and more, 16 MiB pages: 127 GiB)."""
    on_driver = master.startswith("local") and not master.startswith("local-cluster")
    heap = _bytes(settings.get("spark.driver.memory" if on_driver else "spark.executor.memory", "1g"))
    region = _g1_region_bytes(heap or 2**30)
    return f"{region // 2 // 1024 - 1}k"


def _settings(submitted: dict[str, str], settings: dict[str, str], master: str | None) -> dict[str, str]:
    """What a session sets over what spark-submit set (``submitted``): the caller's
    ``settings``, then the defaults where neither set a key, and a page size for the
    tasks' heap (``_page_size``) where no one chose one."""
    chosen = {**{key: value for key, value in _defaults().items() if key not in submitted}, **settings}
    effective = {**submitted, **chosen}
    if "spark.buffer.pageSize" not in effective:
        chosen["spark.buffer.pageSize"] = _page_size(effective, master or effective.get("spark.master", ""))
    return chosen


def spark_session(app_name: str, master: str | None = None, **settings: str):
    """A SparkSession for a job; ``master`` defaults to ``$PERSISTENT_MASTER`` or
    ``local[2]``, unless the job runs under spark-submit, which sets its own.

    Executors run this interpreter (``PYSPARK_PYTHON``) so they find pandas and pyarrow.
    """
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit sets the master itself
    if not master and not under_submit:
        master = os.environ.get("PERSISTENT_MASTER", "local[2]")
    for key, value in _settings(_submitted_settings(), settings, master).items():
        builder = builder.config(key, value)
    if master:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("PERSISTENT_LOG_LEVEL", "WARN"))
    return spark
