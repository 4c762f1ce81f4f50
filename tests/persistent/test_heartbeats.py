"""The heartbeat source's directory as Spark's file source reads it."""

from __future__ import annotations

from persistent.runtime.heartbeats import _literal


def test_the_heartbeat_directory_reaches_sparks_file_source_as_itself_not_as_a_pattern():
    assert _literal("hdfs://nn:8020/jobs/count/spark/heartbeats") == "hdfs://nn:8020/jobs/count/spark/heartbeats"
    assert _literal("/data/run[1]/ck/{a,b}*?x\\y") == "/data/run\\[1\\]/ck/\\{a,b\\}\\*\\?x\\\\y"
