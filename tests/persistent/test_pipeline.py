"""A pipeline's stages (``persistent.runtime.pipeline``) as jobs, without Spark."""

from __future__ import annotations

import pytest

from persistent import GeneratorSource, KafkaSink, KafkaSource, Pipeline, SQLiteSink
from persistent.core.errors import ConfigError
from persistent.examples.count import VectorizedCount


def pipeline(tmp_path, *chain, **settings) -> Pipeline:
    return Pipeline.of(GeneratorSource(total=10), *chain, sink=SQLiteSink(str(tmp_path / "out.db")),
                       checkpoint_dir=str(tmp_path / "ck"), bootstrap_servers="b:9092",
                       kafka_options={"kafka.security.protocol": "SSL"}, **settings)


def test_each_stage_reads_the_topic_the_stage_before_writes_read_committed_in_its_own_directory(tmp_path):
    first, second, third = pipeline(tmp_path, VectorizedCount(), "a", VectorizedCount(), "b", VectorizedCount(),
                                    metrics_port=9100).jobs
    assert isinstance(first.source, GeneratorSource) and isinstance(third.sink, SQLiteSink)
    for writer, reader, topic in ((first, second, "a"), (second, third, "b")):
        assert isinstance(writer.sink, KafkaSink) and isinstance(reader.source, KafkaSource)
        assert (writer.sink.topic, reader.source.topics, reader.source.bootstrap_servers) == (topic, topic, "b:9092")
        assert writer.sink.kafka_options == {"kafka.security.protocol": "SSL"}
        assert reader.source.kafka_options == {"kafka.security.protocol": "SSL", "kafka.isolation.level": "read_committed"}
    assert [job.checkpoint_dir for job in (first, second, third)] == [str(tmp_path / "ck" / f"stage-{n}")
                                                                      for n in (1, 2, 3)]
    assert [job.metrics_port for job in (first, second, third)] == [9100, 9101, 9102]


@pytest.mark.parametrize("chain", [(), (VectorizedCount(), "a"), (VectorizedCount(), VectorizedCount()),
                                   ("a", VectorizedCount()), (VectorizedCount(), "", VectorizedCount())],
                         ids=["empty", "ends-in-a-topic", "no-topic-between", "starts-with-a-topic", "empty-topic"])
def test_a_chain_that_is_not_task_topic_task_is_refused_naming_it(tmp_path, chain):
    with pytest.raises(ConfigError, match="^pipeline: "):
        pipeline(tmp_path, *chain)
