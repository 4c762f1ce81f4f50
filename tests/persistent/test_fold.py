"""The fold before the shuffle without Spark (``persistent.runtime.fold``): a key group
that gets a micro-batch's on-time messages as Spark's partials ends as one that gets
the messages themselves, and the rule of which jobs fold."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from spark_groups import frame

from monoids import Averaged, Count
from persistent import KeyGroup, MonoidTask, PersistentTask, TaskDefinitionError
from persistent.core.badrecords import BadRecords
from persistent.runtime.fold import fold_of
from persistent.runtime.rows import COUNT, EARLIEST, FOLDED, KEY, PART, TIMESTAMP, VALUE, decode
from state import NonWindowState, Window, WindowState

INTERVAL_MS = 100


class Averages(MonoidTask):
    def persistent_state(self):
        return NonWindowState(Averaged())


class Counts(MonoidTask):
    def persistent_state(self):
        return NonWindowState(Count())


def spark_fold(rows: pd.DataFrame, fold, watermark_ms: int, floor_ms: int) -> pd.DataFrame:
    """What Spark's half does with a key group's rows (``persistent.runtime.fold.folded``):
    each source partition's on-time messages with values the monoid takes folded per key
    and interval; the other rows once per distinct row, with their count."""
    values = pd.to_numeric(rows[VALUE], errors="coerce").astype(float)
    takes = np.isfinite(values) if fold.finite else np.ones(len(rows), dtype=bool)
    rows = rows.assign(**{FOLDED: (rows[TIMESTAMP] >= max(watermark_ms, floor_ms)) & takes, "number": values})
    on, off = rows[rows[FOLDED]], rows[~rows[FOLDED]]
    partials = on.groupby([KEY, PART, on[TIMESTAMP] // INTERVAL_MS], sort=False).agg(
        **{COUNT: (TIMESTAMP, "size"), TIMESTAMP: (TIMESTAMP, "max"), EARLIEST: (TIMESTAMP, "min"),
           "partial_0": ("number", "sum")}).reset_index(level=[0, 1]).reset_index(drop=True)
    partials = partials.assign(**{VALUE: None, FOLDED: True})
    others = off.drop(columns="number").groupby(list(off.columns.drop("number")), sort=False, dropna=False).size()
    others = others.rename(COUNT).reset_index()
    columns = [*frame([]).columns, FOLDED, COUNT, EARLIEST, *fold.columns]
    parts = [part for part in (partials, others.assign(**{EARLIEST: others[TIMESTAMP]})) if len(part)]
    whole = pd.concat(parts or [partials], ignore_index=True)
    whole = whole.assign(kind=0, bad_record=None).reindex(columns=columns)
    whole[list(fold.columns)] = whole[list(fold.columns)].fillna(0)
    return whole.sample(frac=1, random_state=len(whole))  # Spark's order is any


messages = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 999), st.sampled_from([1, 2.5, 7, 1e3, "x"]),
                              st.integers(0, 2)), max_size=40)


@given(st.lists(messages, min_size=1, max_size=4), st.integers(0, 600), st.sampled_from([0, 200]),
       st.sampled_from([Averages, Counts]))
def test_partials_of_any_batches_leave_a_group_as_its_messages_do(batches, step_ms, floor_ms, task):
    fold, _ = fold_of(task(), "double")
    plain = KeyGroup(task(), INTERVAL_MS, floor_ms)
    folding = KeyGroup(task(), INTERVAL_MS, floor_ms)
    for n, batch in enumerate(batches):
        watermark_ms = max(n * step_ms, floor_ms)
        rows = frame(batch)
        by_messages = decode([rows])
        partials = spark_fold(rows, fold, watermark_ms, floor_ms)
        by_partials = decode([partials], fold.values)
        reordered = decode([partials.iloc[::-1]], fold.values).partials  # Spark's order is any
        assert all(np.array_equal(getattr(reordered, field), getattr(by_partials.partials, field))
                   for field in ("keys", "timestamps", "earliest", "values", "counts"))
        assert by_partials.count == by_messages.count and by_partials.newest_ms == by_messages.newest_ms
        applied = [group.apply(got.messages, BadRecords.DEAD_LETTER, watermark_ms, got.marked, got.partials)
                   for group, got in ((plain, by_messages), (folding, by_partials))]
        assert [(a.applied, a.replayed, a.late_count, len(a.bad)) for a in applied] == \
            [(applied[0].applied, applied[0].replayed, applied[0].late_count, len(applied[0].bad))] * 2
        assert sorted(map(str, applied[1].bad)) == sorted(map(str, applied[0].bad))
        results, checkpoint = plain.advance(watermark_ms)
        folded_results, folded_checkpoint = folding.advance(watermark_ms)
        key = ["key"]
        pd.testing.assert_frame_equal(folded_results.sort_values(key, ignore_index=True),
                                      results.sort_values(key, ignore_index=True))
        assert (folded_checkpoint and folded_checkpoint.time_ms) == (checkpoint and checkpoint.time_ms)
    assert all(plain.table.get(key) == folding.table.get(key) for key in "abc")


def test_partials_with_a_message_before_the_watermark_are_refused_saying_so():
    fold, _ = fold_of(Counts(), "string")
    rows = spark_fold(frame([("a", 150, 1, 0), ("a", 170, 1, 0)]), fold, watermark_ms=0, floor_ms=0)
    group = KeyGroup(Counts(), INTERVAL_MS)
    got = decode([rows], fold.values)
    with pytest.raises(Exception, match="before the watermark 160 ms"):
        group.apply(got.messages, BadRecords.FAIL, 160, got.marked, got.partials)
    assert group.table.get("a") == 0


class Plain(PersistentTask):
    def persistent_state(self):
        return NonWindowState(Count())

    def process_batch(self, messages):
        return np.ones(len(messages), dtype=np.int64)


def test_a_job_folds_its_messages_when_its_task_is_a_monoid_task_and_its_values_group():
    assert fold_of(Counts(), "string")[0].functions == ()
    assert fold_of(Averages(), "bigint")[0].functions == ("sum",)
    assert fold_of(Plain(), "bigint") == (None, "every message crosses the shuffle (the task is no MonoidTask)")
    assert fold_of(Counts(), "map<string,int>")[0] is None


def test_a_monoid_task_of_another_state_is_refused_before_it_runs():
    class Windowed(MonoidTask):
        def persistent_state(self):
            return WindowState(Count(), Window(100, 100))

    with pytest.raises(TaskDefinitionError, match="Windowed is a MonoidTask: its state must be"):
        Windowed().state_spec()
