"""The project's session settings reach Spark."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark


def test_memory_pages_fit_in_half_a_g1_region_of_the_executors_heap(spark):
    # The test session's executors have 768 MiB: G1 regions of 1 MiB.
    assert spark.sparkContext.getConf().get("spark.buffer.pageSize") == "511k"
