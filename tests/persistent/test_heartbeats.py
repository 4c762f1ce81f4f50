"""The heartbeat source's and the generator's directories as Spark's file source reads them."""

from __future__ import annotations

from persistent.storage.spark_log import literal_path


def test_a_directory_reaches_sparks_file_source_as_itself_not_as_a_pattern():
    assert literal_path("hdfs://nn:8020/jobs/count/spark/heartbeats") == "hdfs://nn:8020/jobs/count/spark/heartbeats"
    assert literal_path("/data/run[1]/ck/{a,b}*?x\\y") == "/data/run\\[1\\]/ck/\\{a,b\\}\\*\\?x\\\\y"
