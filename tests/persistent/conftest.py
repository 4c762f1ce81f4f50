"""Fixtures: job directories written by ``jobwriter.JobWriter``."""

from __future__ import annotations

import pytest

from jobwriter import Counting, JobWriter, SlidingSum, three_batches


@pytest.fixture
def counting_job(tmp_path) -> JobWriter:
    """A counting job of three key groups after ``three_batches``."""
    writer = JobWriter(str(tmp_path / "job"), Counting())
    three_batches(writer)
    return writer


@pytest.fixture
def window_job(tmp_path) -> JobWriter:
    """A sliding-window sum job of three key groups after ``three_batches``."""
    writer = JobWriter(str(tmp_path / "job"), SlidingSum())
    three_batches(writer)
    return writer
