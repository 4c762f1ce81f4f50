"""The pipeline the exactly-once verifier (``test_exactly_once_verifier``) kills and
restarts: stage 1 keeps each key's count, sum, least and greatest value per window of
``WINDOW_MS`` and writes every closed window to the topic ``--between``; stage 2 reads
them and keeps each key's count, sum, least and greatest value of all its windows,
which go to ``--output`` (a Kafka topic). A message's value is an integer, as text.

    spark-submit ... eos_pipeline.py --kafka HOST:PORT --topic IN --between TOPIC \\
        --checkpoint DIR --output kafka://HOST:PORT/OUT [--available-now]
"""

from __future__ import annotations

import argparse
import json
import sys

from monoids import Count, Max, Min, Product, Sum
from persistent import PersistentTask, Pipeline
from persistent.tools.options import add_job_options, add_kafka_options, job_settings, kafka_source, run_app
from state import NonWindowState, Window, WindowState

WINDOW_MS = 1_000


class WindowStats(PersistentTask):
    """Stage 1: count, sum, least and greatest value of each key's messages per window."""

    def persistent_state(self):
        return WindowState(Product(Count(), Sum(), Min(), Max()), Window(WINDOW_MS))

    def process_message(self, state, message):
        value = int(message.value)
        state.update(message.timestamp, (1, value, value, value))


class KeyStats(PersistentTask):
    """Stage 2: the same four of all of a key's windows."""

    def persistent_state(self):
        return NonWindowState(Product(Sum(), Sum(), Min(), Max()))

    def process_message(self, state, message):
        state.update(message.timestamp, tuple(json.loads(message.value)))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--between", required=True, help="the Kafka topic between the stages")
    add_kafka_options(p)
    add_job_options(p)
    return p


def build_pipeline(args) -> Pipeline:
    return Pipeline.of(kafka_source(args), WindowStats(), args.between, KeyStats(), bootstrap_servers=args.kafka,
                       **job_settings(args, table="key_stats", key_column="key", value_column="stats"))


if __name__ == "__main__":
    sys.exit(run_app(parser(), build_pipeline, "eos-pipeline"))
