"""The command-line options every example shares."""

from __future__ import annotations

import argparse

import pytest

from persistent.core.errors import ConfigError
from persistent.sinks.console import ConsoleSink
from persistent.sinks.parquet import ParquetSink
from persistent.sinks.postgres import PostgresSink
from persistent.sinks.sqlite import SQLiteSink
from persistent.sinks.uri import sink_from_uri
from persistent.tools.options import add_job_options, add_kafka_options, job_settings, kafka_source


def parse(*argv):
    parser = argparse.ArgumentParser()
    add_job_options(parser)
    return parser.parse_args(["--checkpoint", "ck", *argv])


def test_defaults_are_exactly_once_dead_letters_late_dropped_key_groups_sized_at_the_start_and_no_metrics():
    settings = job_settings(parse("--output", "sqlite:///tmp/out.db"), "counts", "key", "count")
    assert isinstance(settings.pop("sink"), SQLiteSink)
    assert settings == dict(checkpoint_dir="ck", webhdfs_address=None, checkpoint_interval_ms=1000, key_groups=None,
                            bad_records="dead-letter", late_records="drop", delivery="exactly-once", metrics_port=None,
                            metrics_host="127.0.0.1")
    assert job_settings(parse("--output", "console", "--late-records", "output"), "t", "k", "v")["late_records"] == "output"
    assert job_settings(parse("--output", "console", "--key-groups", "5"), "t", "k", "v")["key_groups"] == 5
    assert job_settings(parse("--output", "console", "--metrics-port", "9108"), "t", "k", "v")["metrics_port"] == 9108
    assert job_settings(parse("--output", "console", "--metrics-host", "0.0.0.0"), "t", "k", "v")["metrics_host"] == (
        "0.0.0.0")


@pytest.mark.parametrize(
    "output, sink", [("postgresql://me@localhost:5432/db", PostgresSink), ("postgres://db/jobs", PostgresSink),
                     ("sqlite:///tmp/out.db", SQLiteSink), ("sqlite://out.db", SQLiteSink), ("out/", ParquetSink),
                     ("file:///tmp/out", ParquetSink), ("hdfs://namenode:8020/out", ParquetSink),
                     ("s3a://bucket/out", ParquetSink), ("console", ConsoleSink)]
)
def test_the_output_uri_chooses_the_sink(output, sink):
    assert isinstance(job_settings(parse("--output", output), "counts", "key", "count")["sink"], sink)


def test_a_sqlite_uri_names_the_database_after_its_two_slashes():
    assert sink_from_uri("sqlite:///tmp/out.db").database == "/tmp/out.db"
    assert sink_from_uri("sqlite://out.db").database == "out.db"


@pytest.mark.parametrize("output, message", [
    ("mysql://me@db/jobs", "output 'mysql://me@db/jobs': no sink has the scheme mysql:// (give sqlite:///PATH, "),
    ("sqlite:/tmp/out.db", "output 'sqlite:/tmp/out.db': a SQLite database is sqlite:// then its path, as in "
                           "sqlite:///tmp/out.db"),
    ("sqlite://", "output 'sqlite://': a SQLite database is sqlite:// then its path"),
    ("postgresql:/db", "output 'postgresql:/db': a PostgreSQL database is postgresql://USER@HOST:PORT/DATABASE"),
    ("abfz://container/out", "no sink has the scheme abfz://"),
])
def test_an_output_no_sink_takes_is_refused_not_taken_for_a_parquet_directory(output, message):
    with pytest.raises(ConfigError) as refused:
        sink_from_uri(output)
    assert message in str(refused.value)


def test_an_unknown_delivery_is_refused_with_the_choices(capsys):
    with pytest.raises(SystemExit):
        parse("--output", "console", "--delivery", "twice")
    error = capsys.readouterr().err
    assert "argument --delivery: invalid choice: 'twice'" in error
    assert all(choice in error for choice in ("exactly-once", "at-least-once", "at-most-once"))


def test_the_output_help_names_every_sink(capsys):
    with pytest.raises(SystemExit):
        parse("--help")
    help_text = " ".join(capsys.readouterr().out.split())
    assert ("sqlite:///PATH, postgresql://USER@HOST:PORT/DATABASE, kafka://HOST:PORT/TOPIC, a Parquet directory, "
            "or console") in help_text
    assert "--metrics-host HOST" in help_text and "(default: 127.0.0.1, this host only; 0.0.0.0: every interface)" in (
        help_text)


def test_kafka_options_reach_the_kafka_source_as_written():
    parser = argparse.ArgumentParser()
    add_kafka_options(parser)
    login = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p=q";'
    source = kafka_source(parser.parse_args(["--kafka", "b:9093", "--topic", "events", "--kafka-option",
                                             "kafka.security.protocol=SASL_SSL",
                                             f"--kafka-option=kafka.sasl.jaas.config={login}"]))
    assert source.kafka_options == {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": login}
