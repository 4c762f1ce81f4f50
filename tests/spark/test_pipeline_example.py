"""The pipeline example (``examples/pipeline.py``) of two stateful stages chained through
a topic of the real broker: per-user counts per 10 s window, then each user's total and
largest window count. Run until Ctrl-C, its totals equal those the generator's
messages give. (``test_exactly_once_verifier`` kills and restarts a pipeline.)"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest

from crash_harness import interrupt_when
from kafka_topics import new_topic
from persistent.tools import cli
from test_kafka import SUBMIT

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark_lock")]

KEYS, TOTAL, WINDOW_MS = 10, 20_000, 10_000


def expected_totals() -> dict[str, list[int]]:
    """Each user's total and largest window count over the windows the run closes: the
    generator's message i has user k{i % KEYS} and event time i + 1 ms, and the last
    window, which the watermark (the newest time) has not passed, stays open."""
    closed_before = TOTAL // WINDOW_MS * WINDOW_MS
    windows = Counter((f"k{i % KEYS}", (i + 1) // WINDOW_MS) for i in range(TOTAL) if i + 1 < closed_before)
    totals: dict[str, list[int]] = {}
    for (user, _), count in windows.items():
        total, largest = totals.get(user, [0, 0])
        totals[user] = [total + count, max(largest, count)]
    return totals


@pytest.fixture
def between(kafka_broker) -> str:
    return new_topic(kafka_broker.bootstrap, "windows", 2)


def test_a_running_pipeline_stopped_by_ctrl_c_has_given_its_totals_and_says_where_its_last_stage_stopped(
        tmp_path, kafka_broker, between, capsys):
    """Without --available-now the stages run at once until a signal: here SIGINT to the
    whole process group, as a terminal's Ctrl-C sends it, once stage 2 has given every
    total its input closes."""
    import os
    import subprocess
    import sys

    log, out = tmp_path / "run.log", tmp_path / "out.db"
    command = [os.path.join(os.path.dirname(sys.executable), "persistent"), "run", "--master", "local[2]", *SUBMIT,
               "pipeline", "--kafka", kafka_broker.bootstrap, "--between", between, "--checkpoint",
               str(tmp_path / "ck"), "--output", f"sqlite://{out}", "--keys", str(KEYS), "--total", str(TOTAL),
               "--rows-per-batch", "5000", "--key-groups", "2"]
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with open(log, "wb") as written:
        job = subprocess.Popen(command, stdout=written, stderr=subprocess.STDOUT, env=environment,
                               start_new_session=True)

    def totals() -> dict:
        try:
            with sqlite3.connect(out) as db:
                return {user: json.loads(value) for user, value in db.execute("SELECT user, totals FROM user_totals")}
        except sqlite3.OperationalError:  # no table yet
            return {}

    returncode = interrupt_when(job, log, lambda: totals() == expected_totals(), timeout_s=240)
    text = log.read_text(errors="replace")
    assert returncode == 130, text
    stopped = [line for line in text.splitlines() if line.startswith("[persistent] stopped by SIGINT")]
    assert len(stopped) == 1 and "stage-2" in stopped[0], text

    assert cli.main(["status", str(tmp_path / "ck")]) == 0
    out = capsys.readouterr().out
    assert "-- stage 1\njob directory  " in out and "\n\n-- stage 2\njob directory  " in out
