"""Fixtures: job directories written by ``jobwriter.JobWriter``."""

from __future__ import annotations

import pytest

from persistent.examples.count import VectorizedCount
from jobwriter import JobWriter, SlidingSum, four_batches


@pytest.fixture
def counting_job(tmp_path) -> JobWriter:
    """A counting job of three key groups after ``four_batches``."""
    writer = JobWriter(str(tmp_path / "job"), VectorizedCount())
    four_batches(writer)
    return writer


@pytest.fixture
def window_job(tmp_path) -> JobWriter:
    """A sliding-window sum job of three key groups after ``four_batches``."""
    writer = JobWriter(str(tmp_path / "job"), SlidingSum())
    four_batches(writer)
    return writer
