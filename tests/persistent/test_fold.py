"""The fold before the shuffle without Spark (``persistent.runtime.fold``): a key group
that gets a micro-batch's on-time messages as Spark's partials ends as one that gets
the messages themselves, and the rule of which jobs fold."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from spark_groups import Accumulator, GroupState, frame

from monoids import Averaged, AveragedValue, Count, Sum
from persistent import KeyGroup, MonoidTask, TaskDefinitionError
from persistent.core.badrecords import BadRecordError, BadRecords, LateRecords
from persistent.examples.count import FoldedCount, VectorizedCount
from persistent.runtime.fold import Folding, fold_of
from persistent.runtime.recovery import Recovery, RecoveryPath
from persistent.runtime.stateful import GroupFunction
from persistent.runtime.rows import COUNT, EARLIEST, FOLDED, KEY, PART, TIMESTAMP, VALUE, Partials, decode
from persistent.storage.filesystems import JobStorage
from state import NonWindowState, SessionWindow, Window, WindowState
from state.window import bucket_ms
from state.errors import StateValueError

INTERVAL_MS = 100


class Averages(MonoidTask):
    def persistent_state(self):
        return NonWindowState(Averaged())


class SlidingAverages(MonoidTask):  # panes of 50 ms: gcd of the size, the step and the interval
    def persistent_state(self):
        return WindowState(Averaged(), Window(300, 150))


class TumblingCounts(MonoidTask):
    def persistent_state(self):
        return WindowState(Count(), Window(200))


def spark_fold(rows: pd.DataFrame, fold, watermark_ms: int, floor_ms: int, bucket: int = INTERVAL_MS) -> pd.DataFrame:
    """What Spark's half does with a key group's rows (``persistent.runtime.fold.folded``):
    each source partition's on-time messages with values the monoid takes folded per key
    and ``bucket``; the other rows once per distinct row, with their count."""
    values = pd.to_numeric(rows[VALUE], errors="coerce").astype(float)
    takes = np.isfinite(values) if fold.finite else np.ones(len(rows), dtype=bool)
    rows = rows.assign(**{FOLDED: (rows[TIMESTAMP] >= max(watermark_ms, floor_ms)) & takes, "number": values})
    on, off = rows[rows[FOLDED]], rows[~rows[FOLDED]]
    partials = on.groupby([KEY, PART, on[TIMESTAMP] // bucket], sort=False).agg(
        **{COUNT: (TIMESTAMP, "size"), TIMESTAMP: (TIMESTAMP, "max"), EARLIEST: (TIMESTAMP, "min"),
           "partial_0": ("number", "sum")}).reset_index(level=[0, 1]).reset_index(drop=True)
    partials = partials.assign(**{VALUE: None, FOLDED: True, "kind": 0, "bad_record": None})
    others = off.drop(columns="number").groupby(list(off.columns.drop("number")), sort=False, dropna=False).size()
    others = others.rename(COUNT).reset_index()
    columns = [*frame([]).columns, FOLDED, COUNT, EARLIEST, *fold.columns]
    parts = [part for part in (partials, others.assign(**{EARLIEST: others[TIMESTAMP]})) if len(part)]
    whole = pd.concat(parts or [partials], ignore_index=True)
    whole = whole.reindex(columns=columns)
    whole[list(fold.columns)] = whole[list(fold.columns)].fillna(0)
    return whole.sample(frac=1, random_state=len(whole))  # Spark's order is any


messages = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 999), st.sampled_from([1, 2.5, 7, 1e3, "x"]),
                              st.integers(0, 2)), max_size=40)


@given(st.lists(messages, min_size=1, max_size=4), st.integers(0, 600), st.sampled_from([0, 200]),
       st.sampled_from([Averages, FoldedCount, SlidingAverages, TumblingCounts]))
def test_partials_of_any_batches_leave_a_group_as_its_messages_do(batches, step_ms, floor_ms, task):
    fold, _ = fold_of(task(), "double")
    bucket = bucket_ms(task().state_spec().window, INTERVAL_MS)
    plain = KeyGroup(task(), INTERVAL_MS, floor_ms)
    folding = KeyGroup(task(), INTERVAL_MS, floor_ms)
    for n, batch in enumerate(batches):
        watermark_ms = max(n * step_ms, floor_ms)
        rows = frame(batch)
        by_messages = decode([rows])
        partials = spark_fold(rows, fold, watermark_ms, floor_ms, bucket)
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
        key = list(results.columns.drop("value"))  # the key, and a window's bounds
        pd.testing.assert_frame_equal(folded_results.sort_values(key, ignore_index=True),
                                      results.sort_values(key, ignore_index=True))
        assert (folded_checkpoint and folded_checkpoint.time_ms) == (checkpoint and checkpoint.time_ms)
    assert all(plain.table.get(key) == folding.table.get(key) for key in "abc")


def partials(keys, times, values, monoid=Count()) -> Partials:
    """Partials of one message each, at ``times``."""
    times = np.array(times, dtype=np.int64)
    return Partials(np.array(keys, dtype=object), times, times, monoid.column(values), np.ones(len(keys), np.int64))


NO_MESSAGES = pd.DataFrame({"key": [], "timestamp": np.array([], dtype=np.int64), "value": []})


@pytest.mark.parametrize("watermark_ms, floor_ms, sealed", [(160, 0, False), (0, 200, False), (0, 0, True)],
                         ids=["watermark", "restore-point", "last-checkpoint"])
def test_partials_with_a_message_before_the_watermark_are_refused_saying_so(watermark_ms, floor_ms, sealed):
    group = KeyGroup(FoldedCount(), INTERVAL_MS, floor_ms)
    if sealed:  # a checkpoint at 200 ms taken
        group.apply(NO_MESSAGES, BadRecords.FAIL, 0, None, partials(["b"], [210], [1]))
        assert group.advance(200)[1].time_ms == 200
    with pytest.raises(StateValueError, match="^messages folded before the shuffle include some before the "
                       "watermark .*: the micro-batch's watermark did not reach Spark's tasks as the key groups "
                       "see it$"):
        group.apply(NO_MESSAGES, BadRecords.FAIL, watermark_ms, None, partials(["a", "a"], [150, 250], [1, 1]))
    assert group.table.get("a") == 0


@pytest.mark.parametrize("chunks", [[], [frame([], beats=2)]], ids=["no-rows", "heartbeats-only"])
def test_a_folded_group_woken_without_messages_decodes_to_none(chunks):
    fold, _ = fold_of(FoldedCount(), "bigint")
    rows = decode([spark_fold(chunk, fold, 0, 0) for chunk in chunks], fold.values)
    assert (rows.count, rows.newest_ms, len(rows.partials.keys)) == (0, -1, 0)


def test_partials_at_the_watermark_are_on_time():
    group = KeyGroup(FoldedCount(), INTERVAL_MS, 100)
    applied = group.apply(NO_MESSAGES, BadRecords.FAIL, 160, None, partials(["a", "b"], [160, 170], [3, 1]))
    assert (applied.applied, group.table.get("a"), group.table.get("b")) == (2, 3, 1)


def test_a_partial_the_monoid_refuses_is_a_bad_record_of_its_own():
    group = KeyGroup(Averages(), INTERVAL_MS)
    big = Averaged().prepare_column([1e308])
    values = np.concatenate([big, big])
    values[0] = (2, np.inf)  # two huge observations folded: their sum overflows
    folded = Partials(np.array(["a", "b"], dtype=object), np.array([10, 20]), np.array([5, 20]), values,
                      np.array([2, 1]))
    applied = group.apply(NO_MESSAGES, BadRecords.DEAD_LETTER, 0, None, folded)
    (bad,) = applied.bad
    assert json.loads(bad.record) == {"key": "a", "timestamp": 10, "value": [2, math.inf]}
    assert bad.reason.endswith("total must be finite")
    assert group.table.get("b") == AveragedValue(1, 1e308) and group.table.get("a") == AveragedValue(0, 0.0)
    with pytest.raises(BadRecordError, match='"key":"a"'):
        KeyGroup(Averages(), INTERVAL_MS).apply(NO_MESSAGES, BadRecords.FAIL, 0, None, folded)


def test_a_folded_groups_function_applies_its_partials_and_reports_their_messages(tmp_path):
    fold, _ = fold_of(FoldedCount(), "bigint")
    reports = Accumulator()
    run_group = GroupFunction(task=FoldedCount(), interval_ms=INTERVAL_MS,
                              recovery=Recovery(RecoveryPath.FRESH, 0, 0, key_groups=1), checkpoints=True,
                              bad_records=BadRecords.FAIL, late_records=LateRecords.DROP, carries=True,
                              storage=JobStorage(str(tmp_path / "job")), reports=reports, fold=fold)
    rows = frame([("a", 10, 1, 0), ("a", 20, 1, 0), ("b", 130, 1, 1), ("a", 5, 1, 0)])
    (out,) = run_group((0,), iter([spark_fold(rows, fold, watermark_ms=8, floor_ms=0)]), GroupState(watermark_ms=8))
    assert dict(zip(out["key"][0], out["value"][0])) == {"a": 2, "b": 1}
    report = reports.value[0]
    assert (report.applied, report.late, report.max_time_ms, report.checkpoint_ms) == (3, 1, 130, None)
    assert (report.folded, report.partials) == (3, 2)  # a at 10 and 20 ms in one partial, b in another


def test_after_a_micro_batch_that_folds_little_the_next_ones_pass_their_rows_through_then_one_folds_again():
    folding = Folding()
    assert not folding.passes_next(200_000, 2_000)
    assert not folding.passes_next(0, 0)  # no messages folded: nothing learnt
    assert not folding.passes_next(4, 2)  # KEEPS of the messages: folding still pays
    assert folding.passes_next(200_000, 190_000)
    assert [folding.passes_next(0, 0) for _ in range(Folding.PASSES)] == [True] * (Folding.PASSES - 1) + [False]
    assert not folding.passes_next(200_000, 2_000)  # the keys changed: the fold pays again
    assert folding.passes_next(8, 7) and not folding.passes_next(8, 2)


def test_a_job_folds_its_messages_when_its_task_is_a_monoid_task_and_its_values_group():
    assert fold_of(FoldedCount(), "string")[0].functions == ()
    assert fold_of(Averages(), "bigint")[0].functions == ("sum",)
    assert fold_of(VectorizedCount(), "bigint") == (None, "every message crosses the shuffle (the task is no MonoidTask)")
    assert fold_of(FoldedCount(), "map<string,int>")[0] is None


def test_a_monoid_task_of_another_state_is_refused_before_it_runs():
    class Sessions(MonoidTask):
        def persistent_state(self):
            return WindowState(Count(), SessionWindow(100))

    class Sums(MonoidTask):
        def persistent_state(self):
            return NonWindowState(Sum())

    for task in (Sessions, Sums):
        with pytest.raises(TaskDefinitionError, match=f"^{task.__name__} is a MonoidTask: its state must be a "
                           "NonWindowState or a WindowState of a Window"):
            task().state_spec()
