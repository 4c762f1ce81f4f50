"""The session's memory pages fit in half a G1 heap region, so they are not humongous."""

from __future__ import annotations

import re
import subprocess

import pytest

from persistent.tools.environment import _java_binary
from persistent.tools.session import _bytes, _g1_region_bytes, _page_size, _settings

HEAPS = ["512m", "1g", "2g", "3g", "4g", "6g", "8g", "16g", "64g", "128g"]


def _jvm_region_bytes(java: str, heap: str) -> int:
    done = subprocess.run([java, f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:+PrintFlagsFinal", "-version"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"this host's JVM does not start with a heap of {heap}: {done.stderr.strip()[:200]}")
    return int(re.search(r"\bG1HeapRegionSize\s*=\s*(\d+)", done.stdout).group(1))


@pytest.mark.skipif(_java_binary() is None, reason="asks the JVM")
def test_the_region_size_is_the_jvms_own_choice():
    java = _java_binary()
    assert {heap: _g1_region_bytes(_bytes(heap)) for heap in HEAPS} == \
        {heap: _jvm_region_bytes(java, heap) for heap in HEAPS}


@pytest.mark.parametrize("heap", HEAPS)
def test_a_page_and_its_array_header_take_less_than_half_a_region_and_a_task_may_fill_the_heap(heap):
    page = _bytes(_page_size({"spark.driver.memory": heap}, "local[2]"))
    region = _g1_region_bytes(_bytes(heap))
    assert page + 16 < region // 2  # a long[]: 16 bytes of header
    # Spark's page table holds 8,192 pages of a task: as much as the heap, up to 127 GiB.
    assert 8192 * page >= min(_bytes(heap), 127 * 2**30)


def test_the_heap_is_the_drivers_under_a_local_master_and_the_executors_else():
    settings = {"spark.driver.memory": "6g", "spark.executor.memory": "768m"}
    assert _page_size(settings, "local[2]") == "2047k"
    assert _page_size(settings, "local") == "2047k"
    assert _page_size(settings, "local-cluster[2,1,1024]") == "511k"
    assert _page_size(settings, "spark://master:7077") == "511k"
    assert _page_size({}, "yarn") == "511k"  # Spark's default heap, 1 GiB
    assert _page_size({"spark.executor.memory": "16g"}, "yarn") == "4095k"
    # A driver JVM that runs already keeps its heap, whatever the settings say.
    assert _page_size(settings, "local[2]", driver_region=2**21) == "1023k"
    assert _page_size(settings, "local[2]", driver_region=0) is None  # not G1
    assert _page_size(settings, "yarn", driver_region=0) == "511k"  # the executors' heap


def test_pages_off_the_heap_keep_sparks_size():
    assert _page_size({"spark.memory.offHeap.enabled": "true", "spark.driver.memory": "6g"}, "local[2]") is None
    assert "spark.buffer.pageSize" not in _settings({}, {"spark.memory.offHeap.enabled": "true"}, "local[2]")


def test_memory_settings_are_read_as_spark_reads_them():
    assert _bytes("6g") == 6 * 2**30 and _bytes("6G") == 6 * 2**30 and _bytes("6gb") == 6 * 2**30
    assert _bytes("1024m") == 2**30 and _bytes("1024") == 2**30  # a bare number is MiB
    assert _bytes("2048k") == 2**21 and _bytes("1t") == 2**40
    assert _bytes("1.5g") is None and _bytes("lots") is None and _bytes("") is None


def test_a_page_size_someone_chose_stays_and_spark_submits_master_and_heap_size_the_pages():
    assert _settings({}, {"spark.driver.memory": "6g"}, "local[2]")["spark.buffer.pageSize"] == "2047k"
    assert _settings({}, {"spark.buffer.pageSize": "64m"}, "local[2]")["spark.buffer.pageSize"] == "64m"
    assert "spark.buffer.pageSize" not in _settings({"spark.buffer.pageSize": "8m"}, {}, None)
    # Under spark-submit the master is its, and the driver's heap that of its JVM.
    assert _settings({"spark.master": "local[2]"}, {}, None, driver_region=2**21)["spark.buffer.pageSize"] == "1023k"
    cluster = {"spark.master": "spark://master:7077", "spark.executor.memory": "16g"}
    assert _settings(cluster, {}, None, driver_region=2**20)["spark.buffer.pageSize"] == "4095k"
    # The project's defaults fill gaps only.
    assert _settings({}, {}, "local[2]")["spark.sql.shuffle.partitions"] == "4"
    assert "spark.sql.shuffle.partitions" not in _settings({"spark.sql.shuffle.partitions": "9"}, {}, None)
