"""The planner keeps the job's settings in the session until its query has made its
sources (``persistent.runtime.planner._wait_for_sources``): a file source reads them
then, after ``start`` has returned."""

from __future__ import annotations

import time

from persistent.runtime.planner import _wait_for_sources


class Query:
    """A query whose status goes through ``messages``, one a look, the last one kept."""

    def __init__(self, *messages: str, active: bool = True):
        self.messages, self.looks, self.isActive = list(messages), 0, active

    @property
    def status(self) -> dict:
        self.looks += 1
        return {"message": self.messages[min(self.looks, len(self.messages)) - 1]}


def test_the_wait_ends_once_the_query_made_its_sources():
    query = Query("Initializing StreamExecution", "Initializing sources", "Initializing sources",
                  "Getting offsets from FileStreamSource[file:/in]")
    _wait_for_sources(query)
    assert query.looks == 4


def test_a_query_that_ended_or_never_makes_its_sources_ends_the_wait():
    ended = Query("Initializing sources", active=False)
    _wait_for_sources(ended)
    assert ended.looks == 0

    began = time.monotonic()
    _wait_for_sources(Query("Initializing sources"), timeout_s=0.2)
    assert 0.2 <= time.monotonic() - began < 2
