"""The command-line options every example shares."""

from __future__ import annotations

import argparse

import pytest

from persistent.sinks.parquet import ParquetSink
from persistent.sinks.postgres import PostgresSink
from persistent.sinks.sqlite import SQLiteSink
from persistent.tools.options import add_job_options, job_settings


def parse(*argv):
    parser = argparse.ArgumentParser()
    add_job_options(parser)
    return parser.parse_args(["--checkpoint", "ck", *argv])


def test_defaults_are_exactly_once_dead_letters_late_dropped_key_groups_sized_at_the_start_and_no_metrics():
    settings = job_settings(parse("--output", "sqlite:///tmp/out.db"), "counts", "key", "count")
    assert isinstance(settings.pop("sink"), SQLiteSink)
    assert settings == dict(checkpoint_dir="ck", webhdfs_address=None, checkpoint_interval_ms=1000, key_groups=None,
                            bad_records="dead-letter", late_records="drop", delivery="exactly-once", metrics_port=None)
    assert job_settings(parse("--output", "console", "--late-records", "output"), "t", "k", "v")["late_records"] == "output"
    assert job_settings(parse("--output", "console", "--key-groups", "5"), "t", "k", "v")["key_groups"] == 5
    assert job_settings(parse("--output", "console", "--metrics-port", "9108"), "t", "k", "v")["metrics_port"] == 9108


@pytest.mark.parametrize(
    "output, sink", [("postgresql://me@localhost:5432/db", PostgresSink), ("out/", ParquetSink)]
)
def test_the_output_uri_chooses_the_sink(output, sink):
    assert isinstance(job_settings(parse("--output", output), "counts", "key", "count")["sink"], sink)


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
    assert "sqlite:///PATH, postgresql://USER@HOST:PORT/DATABASE, a Parquet directory, or console" in help_text
