"""A SparkSession with the project's defaults (``persistent/conf/spark-defaults.conf``,
``persistent.storage.package_data``)."""

from __future__ import annotations

import os
import sys

from persistent.storage.package_data import spark_defaults
from persistent.tools.environment import check_java

__all__ = ["spark_session"]


def _submitted_settings() -> dict[str, str]:
    """What spark-submit set: it passes them to its JVM as system properties, which a
    ``SparkConf`` reads once Python is connected to that JVM."""
    if not _under_submit():
        return {}
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return dict(SparkConf().getAll())


def _under_submit() -> bool:
    """Whether spark-submit sets the master: it started this process (its JVM runs), or
    the session starts it with the options ``PYSPARK_SUBMIT_ARGS`` holds (``persistent
    run``)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "PYSPARK_SUBMIT_ARGS" in os.environ


def _running_region_bytes() -> int:
    """The G1 region size of the driver JVM this process talks to, 0 if it does not
    run G1."""
    from pyspark import SparkContext

    jvm = SparkContext._jvm
    hotspot = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    if hotspot.getVMOption("UseG1GC").getValue() != "true":
        return 0
    return int(hotspot.getVMOption("G1HeapRegionSize").getValue())


#: Units of Spark's memory settings (``JavaUtils.byteStringAsBytes``; a bare number is MiB).
_UNITS = {"": 2**20, "b": 1, "k": 2**10, "kb": 2**10, "m": 2**20, "mb": 2**20, "g": 2**30, "gb": 2**30,
          "t": 2**40, "tb": 2**40, "p": 2**50, "pb": 2**50}


def _bytes(memory: str) -> int | None:
    """The bytes of a Spark memory setting (``"6g"``, ``"1024m"``), None if it is not
    one (Spark says what is wrong with it)."""
    number = memory.strip().lower().rstrip("bkmgtp")
    unit = memory.strip().lower()[len(number):]
    return int(number) * _UNITS[unit] if number.isdigit() and unit in _UNITS else None


def _g1_region_bytes(heap_bytes: int) -> int:
    """The heap region size the JVM's G1 collector picks for a heap of ``heap_bytes``
    (the ergonomics of JDK 17 and 21): about 2,048 regions, a power of two from 1 to
    32 MiB."""
    target = max(heap_bytes // 2048, 2**20)
    return min(1 << (target - 1).bit_length(), 2**25)


def _page_size(settings: dict[str, str], master: str, driver_region: int | None = None) -> str | None:
    """``spark.buffer.pageSize`` for the heap that runs the tasks: just under half a G1
    region, so that a page is not a humongous object. The heap is the driver's under a
    ``local`` master, else the executors' (``spark.executor.memory``); the driver's
    region is ``driver_region`` when its JVM runs already (0: it does not run G1),
    else the one of ``spark.driver.memory``. None where the size does not matter: pages
    off the heap (``spark.memory.offHeap.enabled``), or a driver on another collector.

    Spark sizes its memory pages (hash aggregation, sorts, the rows queued for Python
    UDFs) from the heap and the cores, up to 64 MiB: 64 MiB on a 6 GiB heap with 2
    cores, 16 MiB for a 1 GiB executor with one. G1 allocates an object larger than
    half a region as humongous, straight into the old generation, and such allocations
    start concurrent marking cycles: a micro-batch with a few of them spends seconds of
    CPU marking a heap that is mostly young garbage. A task may hold 8,192 pages: with
    a page of about 1/4,096 of the heap, more than the heap (16 MiB pages on heaps of
    64 GiB and more: 127 GiB)."""
    if settings.get("spark.memory.offHeap.enabled", "false").strip().lower() == "true":
        return None
    if master.startswith("local") and not master.startswith("local-cluster"):
        if driver_region is not None:
            region = driver_region
        else:
            region = _g1_region_bytes(_bytes(settings.get("spark.driver.memory", "1g")) or 2**30)
    else:
        region = _g1_region_bytes(_bytes(settings.get("spark.executor.memory", "1g")) or 2**30)
    return f"{region // 2 // 1024 - 1}k" if region else None


def _settings(submitted: dict[str, str], settings: dict[str, str], master: str | None,
              driver_region: int | None = None) -> dict[str, str]:
    """What a session sets over what spark-submit set (``submitted``): the caller's
    ``settings``, then the defaults where neither set a key, and a page size for the
    tasks' heap (``_page_size``) where no one chose one."""
    chosen = {**{key: value for key, value in spark_defaults().items() if key not in submitted}, **settings}
    effective = {**submitted, **chosen}
    if "spark.buffer.pageSize" not in effective:
        page = _page_size(effective, master or effective.get("spark.master", ""), driver_region)
        if page:
            chosen["spark.buffer.pageSize"] = page
    return chosen


def spark_session(app_name: str, master: str | None = None, **settings: str):
    """A SparkSession for a job; ``master`` defaults to ``$PERSISTENT_MASTER`` or
    ``local[2]``, unless the job runs under spark-submit, which sets its own.

    Executors run this interpreter (``PYSPARK_PYTHON``) so they find pandas and pyarrow.
    """
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if not master and not _under_submit():  # spark-submit sets the master itself
        master = os.environ.get("PERSISTENT_MASTER", "local[2]")
    submitted = _submitted_settings()
    # A driver JVM that runs already (spark-submit's, or an earlier session's) keeps its heap.
    driver_region = _running_region_bytes() if SparkContext._jvm is not None else None
    for key, value in _settings(submitted, settings, master, driver_region).items():
        builder = builder.config(key, value)
    if master:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("PERSISTENT_LOG_LEVEL", "WARN"))
    return spark
