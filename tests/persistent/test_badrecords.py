"""Bad records in a key group, without Spark: they are isolated, reported with the
message they came from, and change no state; the other messages of the batch are
applied as if the bad ones had never been sent."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiles import examples
from spark_groups import spark_rows

from monoids import Sum
from persistent import PersistentTask
from persistent.core.badrecords import BadRecord, BadRecordError, BadRecords, LateRecords
from persistent.core.errors import ConfigError
from persistent.runtime.keygroup import KeyGroup
from persistent.runtime.rows import Kind, decode
from persistent.storage.dead_letters import DeadLetters
from persistent.tools.testing import TaskTester
from state import NonWindowState, Window, WindowState

INT64_MAX = np.iinfo(np.int64).max


class ParseSum(PersistentTask):
    """Sums the values, parsed as integers: a value that is no integer makes it raise."""

    def persistent_state(self):
        return NonWindowState(Sum())

    def process_batch(self, messages):
        return np.array([int(v) for v in messages["value"]], dtype=np.int64)


class ParseSumPerMessage(PersistentTask):
    """``ParseSum`` one message at a time; reads its state before it updates it twice."""

    def persistent_state(self):
        return NonWindowState(Sum())

    def process_message(self, state, message):
        state.update(message.timestamp, 0)
        state.get()
        state.update(message.timestamp, int(message.value))


class PassValues(PersistentTask):
    """Hands each value to the monoid as it is: the monoid decides what it takes."""

    def __init__(self, monoid=None):
        self.monoid = monoid or Sum()

    def persistent_state(self):
        return NonWindowState(self.monoid)

    def process_batch(self, messages):
        return messages["value"].to_numpy()


class PassValuesPerMessage(PersistentTask):
    """``PassValues`` one message at a time."""

    def persistent_state(self):
        return NonWindowState(Sum())

    def process_message(self, state, message):
        state.update(message.timestamp, message.value)


class WindowedParseSum(ParseSum):
    def persistent_state(self):
        return WindowState(Sum(), Window(40, 20))


def state_of(tester: TaskTester) -> bytes:
    return tester.group.encode()


#: Messages whose value is an integer in text, or "x", on which the tasks raise.
messages_with_bad_values = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(1, 300),
              st.one_of(st.integers(-5, 9).map(str), st.just("x"))),
    max_size=50,
)


@pytest.mark.parametrize("task", [ParseSum(), ParseSumPerMessage(), WindowedParseSum()], ids=type)
@given(messages=messages_with_bad_values)
@settings(max_examples=examples(30))
def test_dead_lettered_messages_leave_the_state_of_a_run_without_them(task, messages):
    messages = sorted(messages, key=lambda m: m[1])
    with_bad = TaskTester(task, checkpoint_interval_ms=100, bad_records=BadRecords.DEAD_LETTER)
    applied = with_bad.send(messages)
    with_bad.advance_watermark(350)

    clean = TaskTester(task, checkpoint_interval_ms=100)
    clean.send([m for m in messages if m[2] != "x"])
    clean.advance_watermark(350)

    assert state_of(with_bad) == state_of(clean)
    assert applied == sum(m[2] != "x" for m in messages)
    method = "process_batch" if task.vectorized else "process_message"
    expected = [
        BadRecord(None, json.dumps({"key": k, "timestamp": t, "value": v}, separators=(",", ":")),
                  f"{type(task).__name__}.{method} raised ValueError: invalid literal for int() with base 10: 'x'")
        for k, t, v in messages if v == "x"
    ]
    assert sorted(with_bad.dead_letters, key=str) == sorted(expected, key=str)


@pytest.mark.parametrize("task", [ParseSum(), ParseSumPerMessage()], ids=type)
def test_fail_mode_names_the_record_and_changes_no_state(task):
    tester = TaskTester(task, checkpoint_interval_ms=100)
    tester.send([("a", 1, "5"), ("b", 2, "7")])
    before = state_of(tester)
    with pytest.raises(BadRecordError) as failure:
        tester.send([("a", 3, "1"), ("b", 4, "2"), ("c", 5, "x"), ("a", 6, "4")])
    assert failure.value.record.record == '{"key":"c","timestamp":5,"value":"x"}'
    assert "'x'" in str(failure.value) and '"key":"c"' in str(failure.value)
    assert state_of(tester) == before
    assert (tester.peek("a"), tester.peek("b")) == (5, 7)


class UpdateAsGiven(PersistentTask):
    """Updates the key at the time and with the value the message's value names, as given."""

    def persistent_state(self):
        return NonWindowState(Sum())

    def process_message(self, state, message):
        state.update(*message.value)


def test_an_update_refused_by_the_state_names_the_key_and_time_and_drops_its_message():
    tester = TaskTester(UpdateAsGiven(), bad_records=BadRecords.DEAD_LETTER)
    tester.send([("a", 1, (1, 5)), ("b", 2, (2, "x")), ("c", 3, (-4, 1)), ("a", 4, (4, 2))])
    assert (tester.peek("a"), tester.peek("b"), tester.peek("c")) == (7, 0, 0)
    (value, time) = [b.reason for b in tester.dead_letters]
    assert "takes int values, got 'x' at key 'b' at timestamp 2" in value
    assert "timestamp of key 'c' at timestamp -4 must be in [0, 2**63) ms" in time


def test_a_message_whose_key_is_of_another_kind_than_the_groups_keys_is_a_bad_record():
    tester = TaskTester(PassValues(), checkpoint_interval_ms=100, bad_records=BadRecords.DEAD_LETTER)
    tester.send([("a", 1, 1)])
    assert tester.send([("b", 2, 2), (b"a", 3, 4), (5, 4, 8), ("a", 5, 16)]) == 2
    assert [bad.record for bad in tester.dead_letters] == [
        '{"key":"b\'a\'","timestamp":3,"value":4}', '{"key":5,"timestamp":4,"value":8}']
    assert [bad.reason.split(";")[0] for bad in tester.dead_letters] == [
        "keys of one table must be of one kind: this update brings bytes keys (b'a') to a table of str keys",
        "keys of one table must be of one kind: this update brings numeric keys (5) to a table of str keys"]
    tester.advance_watermark(100)
    restored = tester.restore(100)
    assert (restored.peek("a"), restored.peek("b"), restored.peek(b"a")) == (17, 2, 0)


def test_a_key_of_another_kind_fails_a_job_that_fails_on_bad_records_and_changes_no_state():
    tester = TaskTester(PassValuesPerMessage())
    tester.send([("a", 1, 1)])
    before = state_of(tester)
    with pytest.raises(BadRecordError, match=r"brings bytes keys \(b'a'\) to a table of str keys") as failed:
        tester.send([("b", 2, 2), (b"a", 3, 4)])
    assert failed.value.record.record == '{"key":"b\'a\'","timestamp":3,"value":4}'
    assert state_of(tester) == before


def test_a_value_the_monoid_refuses_fails_a_job_that_fails_on_bad_records():
    tester = TaskTester(PassValues(Sum(float)))
    with pytest.raises(BadRecordError, match="cannot take NaN"):
        tester.send([("a", 1, 1.5), ("b", 2, np.nan)])
    assert tester.peek("a") == 0.0


def test_values_the_monoid_refuses_are_isolated_and_the_rest_applied():
    tester = TaskTester(PassValues(Sum(float)), bad_records=BadRecords.DEAD_LETTER)
    frame = pd.DataFrame({"key": ["a", "b", "a", "c"], "timestamp": [1, 2, 3, 4], "value": [1.5, np.nan, 2.0, "x"]})
    assert tester.send(frame) == 2
    assert tester.peek("a") == 3.5 and tester.peek("b") == 0.0 and tester.peek("c") == 0.0
    assert [(b.record, b.reason) for b in tester.dead_letters] == [
        ('{"key":"b","timestamp":2,"value":NaN}', "Sum(kind='float') cannot take NaN"),
        ('{"key":"c","timestamp":4,"value":"x"}', "Sum(kind='float') takes float values, got 'x'"),
    ]


class Doubled(PersistentTask):
    """Sums twice each value: a value that is no number doubles to one the monoid refuses,
    and a batch with a missing value makes it raise."""

    def persistent_state(self):
        return NonWindowState(Sum())

    def process_batch(self, messages):
        if messages["value"].isna().any():
            raise ValueError("a value is missing")
        return (messages["value"] * 2).to_numpy()


class Made(PersistentTask):
    """Makes one update of its own per batch, at the key, time and value of the first message's value."""

    def persistent_state(self):
        return NonWindowState(Sum())

    def process_batch(self, messages):
        key, timestamp, value = messages["value"].iloc[0]
        return pd.DataFrame({"key": [key], "timestamp": [timestamp], "value": [value]})


def test_a_bad_value_is_the_bad_record_of_the_message_it_came_from_or_of_the_update_the_task_made():
    tester = TaskTester(Doubled(), bad_records=BadRecords.DEAD_LETTER)
    tester.send([("a", 1, "x"), ("b", 2, 3)])
    # The task raises on the batch, so on its halves: the bad value is in the second.
    tester.send([("c", 3, 1), ("d", 4, None), ("e", 5, "z"), ("f", 6, 2)])
    made = TaskTester(Made(), bad_records=BadRecords.DEAD_LETTER)
    made.send([("a", 1, ("made", 7, "y"))])
    assert [(b.record, b.reason) for b in tester.dead_letters + made.dead_letters] == [
        ('{"key":"a","timestamp":1,"value":"x"}', "Sum(kind='int') takes int values, got 'xx'"),
        ('{"key":"d","timestamp":4,"value":null}', "Doubled.process_batch raised ValueError: a value is missing"),
        ('{"key":"e","timestamp":5,"value":"z"}', "Sum(kind='int') takes int values, got 'zz'"),
        ('{"key":"made","timestamp":7,"value":"y"}', "Sum(kind='int') takes int values, got 'y'"),
    ]
    assert (tester.peek("b"), tester.peek("c"), tester.peek("f")) == (6, 2, 4)


@pytest.mark.parametrize("task", [PassValues, PassValuesPerMessage])
def test_a_sum_that_would_overflow_refuses_only_the_message_that_overflows(task):
    tester = TaskTester(task(), bad_records=BadRecords.DEAD_LETTER)
    tester.send([("big", 1, INT64_MAX - 10)])
    frame = pd.DataFrame({"key": ["small", "big", "big", "small"], "timestamp": [2, 3, 4, 5], "value": [1, 20, 4, 2]})
    assert tester.send(frame) == 3
    assert tester.peek("big") == INT64_MAX - 6 and tester.peek("small") == 3
    assert tester.send([("big", 6, 10), ("big", 7, 20)]) == 0  # each overflows
    assert [bad.record for bad in tester.dead_letters] == [
        '{"key":"big","timestamp":3,"value":20}', '{"key":"big","timestamp":6,"value":10}',
        '{"key":"big","timestamp":7,"value":20}']
    assert all("does not fit in 64 bits" in bad.reason for bad in tester.dead_letters)


@pytest.mark.parametrize("task", [PassValues, PassValuesPerMessage])
def test_an_overflow_in_fail_mode_leaves_the_group_as_it_was(task):
    tester = TaskTester(task())
    tester.send([("big", 1, INT64_MAX - 10), ("small", 1, 1)])
    before = state_of(tester)
    with pytest.raises(BadRecordError, match="does not fit in 64 bits") as failed:
        tester.send([("small", 2, 5), ("big", 3, 20), ("small", 4, 6)])
    assert failed.value.record.record == '{"key":"big","timestamp":3,"value":20}'
    assert state_of(tester) == before


def test_rows_marked_by_the_source_are_bad_records_unless_before_the_restore_point():
    group = KeyGroup(PassValues(), 100, floor_ms=10)
    marked = [BadRecord(f"in/a.jsonl line {n}", "not json", "not JSON").json() for n in (1, 2)]
    message, bad = Kind.MESSAGE, Kind.BAD_RECORD
    rows = decode([spark_rows([message, bad, message, bad, message], ["a", None, "a", None, "b"],
                              [5, None, 12, 4, 13], [1, 0, 2, 0, 3], [None, marked[0], None, marked[1], None],
                              [0] * 5)])
    outcome = group.apply(rows.messages, BadRecords.DEAD_LETTER, marked=rows.marked)
    assert (outcome.applied, outcome.replayed, outcome.late_count) == (2, 2, 0)
    assert outcome.bad == [BadRecord.from_json(marked[0])]
    assert group.table.get("a") == 2 and group.table.get("b") == 3
    with pytest.raises(BadRecordError, match=r"in/a\.jsonl line 1") as failed:
        group.apply(rows.messages, BadRecords.FAIL, marked=rows.marked)
    assert failed.value.record == BadRecord.from_json(marked[0])
    # Behind the watermark, the good message at 12 ms is late; the marked rows stay bad records.
    outcome = KeyGroup(PassValues(), 100, floor_ms=10).apply(rows.messages, BadRecords.DEAD_LETTER, 13, rows.marked)
    assert (outcome.applied, outcome.replayed, outcome.late.values.tolist(), len(outcome.bad)) == (
        1, 2, [["a", 12, 2]], 1)
    assert outcome.late["timestamp"].dtype == np.int64  # times, though Spark handed them over as floats


def test_a_task_that_fails_on_every_message_dead_letters_each_once():
    tester = TaskTester(ParseSum(), bad_records=BadRecords.DEAD_LETTER)
    assert tester.send([(k, t, "x") for t, k in enumerate("abcdefghij", 1)]) == 0
    assert sorted(json.loads(b.record)["key"] for b in tester.dead_letters) == list("abcdefghij")
    assert len(tester.group.table) == 0


def test_dead_letters_read_back_by_batch(tmp_path):
    written = {(0, 2): [BadRecord("f line x", "x", "bad"), BadRecord("f line y", "y", "bad")],
               (1, 0): [BadRecord.late("k", 5, 1, watermark_ms=9)]}
    for (generation, batch), records in written.items():
        folder = tmp_path / f"generation={generation}" / f"batch={batch:010d}"
        folder.mkdir(parents=True)
        (folder / "part-00000.txt").write_text("".join(r.json() + "\n" for r in records))
    read = DeadLetters(str(tmp_path)).read()
    assert read[["generation", "batch", "position", "record", "reason"]].values.tolist() == [
        [0, 2, "f line x", "x", "bad"],
        [0, 2, "f line y", "y", "bad"],
        [1, 0, None, '{"key":"k","timestamp":5,"value":1}', "late"],
    ]
    assert read["event_time_ms"].tolist() == [pd.NA, pd.NA, 5] and read["watermark_ms"].tolist()[2] == 9
    assert DeadLetters(str(tmp_path / "none")).read().empty


def test_a_job_takes_the_mode_by_name_and_refuses_others(tmp_path):
    from persistent import GeneratorSource, Job, SQLiteSink
    from persistent.runtime.planner import Plan

    def job(**kwargs):
        return Job(ParseSum(), GeneratorSource(), SQLiteSink(str(tmp_path / "o.db")), str(tmp_path / "ck"), **kwargs)

    assert Plan.of(job()).bad_records is BadRecords.FAIL
    dead = job(bad_records="dead-letter")
    assert dead.bad_records == "dead-letter" and Plan.of(dead).bad_records is BadRecords.DEAD_LETTER
    assert dead.dead_letters.directory == f"{tmp_path / 'ck'}/dead-letters"
    assert job(dead_letter_dir="elsewhere/").dead_letters.directory == "elsewhere"
    with pytest.raises(ConfigError, match="bad_records must be one of 'fail', 'dead-letter', got 'skip'"):
        job(bad_records="skip")
    assert Plan.of(job()).late_records is LateRecords.DROP
    assert Plan.of(job(late_records="output")).late_records is LateRecords.OUTPUT
    with pytest.raises(ConfigError, match="late_records must be one of 'drop', 'output', got 'keep'"):
        job(late_records="keep")
    with pytest.raises(ConfigError, match="max_event_time_skew_ms must be >= 0, got -1"):
        job(max_event_time_skew_ms=-1)


@pytest.mark.parametrize("task", [ParseSum(), ParseSumPerMessage()], ids=type)
def test_the_results_are_of_the_keys_applied_not_of_a_failed_batch_nor_of_bad_records(task):
    def frame(messages):
        return pd.DataFrame(messages, columns=["key", "timestamp", "value"])

    group = KeyGroup(task, 100)
    with pytest.raises(BadRecordError):
        group.apply(frame([("a", 1, "5"), ("c", 2, "x")]))
    group.apply(frame([("b", 3, "7"), ("d", 4, "x"), ("b", 5, "1")]), BadRecords.DEAD_LETTER)
    results, _ = group.advance(50)
    assert dict(zip(results["key"], results["value"])) == {"b": 8}
    assert group.advance(60)[0].empty


def test_a_bad_record_error_names_where_the_record_was_found():
    record = BadRecord("in/a.jsonl line 2", "{", "not JSON")
    assert str(BadRecordError(record)) == "bad record at in/a.jsonl line 2: not JSON; record: {"
    assert str(BadRecordError(record, "micro-batch 0.4")) == (
        "bad record in micro-batch 0.4 at in/a.jsonl line 2: not JSON; record: {")
