"""The key groups' input (``persistent.runtime.rows``) without Spark: the decoder of a
group's rows, and the watermark's shift between Spark and the job."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from spark_groups import frame, marked, packed, spark_rows, unpacked

from persistent.core.badrecords import BadRecord
from persistent.runtime.rows import (WATERMARK_LAG_MS, Kind, decode, group_watermark_ms, job_watermark_ms,
                                     next_watermark_ms, spark_delay, timeout_ms)


def test_a_groups_rows_decode_to_its_messages_in_fold_order_and_its_bad_records_without_heartbeats():
    late_bad, timeless_bad = BadRecord("f line 1", "x", "bad"), BadRecord("f line 2", "y", "no event time")
    chunks = [frame([("b", 20, 2, 1), ("a", 10, 1, 1)], beats=1), marked(timeless_bad), marked(late_bad, 15, part=1),
              frame([("c", 20, 3, 0)], beats=2)]
    rows = decode(chunks)
    assert rows.messages.to_dict("list") == {"key": ["a", "c", "b"], "timestamp": [10, 20, 20], "value": [1, 3, 2]}
    assert rows.messages["timestamp"].dtype == np.int64  # Spark's floats, once the heartbeats' nulls are gone
    assert [BadRecord.from_json(text) for text in rows.marked.records] == [late_bad, timeless_bad]
    assert rows.marked.times_ms.tolist()[0] == 15 and np.isnan(rows.marked.times_ms[1])
    assert (rows.count, rows.newest_ms) == (5, 20)  # a bad record's time is no message's


@pytest.mark.parametrize("chunks", [[], [frame([], beats=3)]], ids=["no-rows", "heartbeats-only"])
def test_a_group_woken_without_messages_decodes_to_none(chunks):
    rows = decode(chunks)
    assert (rows.count, rows.newest_ms, len(rows.messages), len(rows.marked.records)) == (0, -1, 0, 0)


def test_the_newest_rows_give_the_event_time_every_source_partition_reached_and_no_message():
    def newest(*times_ms):  # one row from each task before the shuffle (a source partition) that read messages
        n = len(times_ms)
        return spark_rows([Kind.NEWEST] * n, [None] * n, list(times_ms), [0] * n, [None] * n, [-1] * n)

    rows = decode([frame([("a", 10, 1, 0)], beats=1), newest(250, 180), frame([("b", 20, 2, 1)]), newest(240)])
    assert rows.messages.to_dict("list") == {"key": ["a", "b"], "timestamp": [10, 20], "value": [1, 2]}
    assert (rows.count, rows.newest_ms, rows.batch_reached_ms) == (2, 20, 180)
    assert decode([frame([("a", 10, 1, 0)])]).batch_reached_ms is None
    assert (decode([newest(7)]).count, decode([newest(7)]).batch_reached_ms) == (0, 7)


@given(st.data())
def test_packed_messages_decode_as_their_rows_do_whatever_the_packs_cuts_and_order(data):
    """Each source partition's messages of a group come in packs of any sizes (in their
    order there, numbered), and Spark hands the packs over in any order and any chunks,
    among other rows: the group reads the messages it would read from their rows."""
    messages = data.draw(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(range(0, 100, 25)),
                                            st.integers(-9, 9), st.integers(0, 2)), max_size=30))
    bad = BadRecord("f line 1", "x", "bad")
    packs = []
    for part in range(3):
        own = [message for message in messages if message[3] == part]
        cuts = sorted(data.draw(st.sets(st.integers(1, len(own) - 1)))) if len(own) > 1 else []
        edges = [0, *cuts, len(own)]
        packs += [packed(own[start:end], seq) for seq, (start, end) in enumerate(zip(edges, edges[1:])) if end > start]
    others = [unpacked(frame([], beats=1)), unpacked(marked(bad, 30, part=2))]
    shuffled = data.draw(st.permutations(packs + others))
    cut = data.draw(st.integers(0, len(shuffled)))
    chunks = [pd.concat(part, ignore_index=True) for part in (shuffled[:cut], shuffled[cut:]) if part]
    got, expected = decode(chunks), decode([frame(messages, beats=1), marked(bad, 30, part=2)])
    assert got.messages.to_dict("list") == expected.messages.to_dict("list")
    assert [got.messages[name].dtype for name in got.messages] == [expected.messages[name].dtype
                                                                    for name in expected.messages]
    assert got.marked.records.tolist() == expected.marked.records.tolist()
    assert (got.count, got.newest_ms) == (expected.count, expected.newest_ms)
    assert got.count == len(messages) + 1


@pytest.mark.parametrize("values", [
    pa.array(["x", None, "z"]), pa.array(["x", "y", "z"]), pa.array([1, None, 3], pa.int64()),
    pa.array([1, 2, 3], pa.int64()), pa.array([1, None, 3], pa.int32()), pa.array([1, 2, 3], pa.int16()),
    pa.array([1, None, 3], pa.int8()), pa.array([1.5, None, float("nan")], pa.float64()),
    pa.array([1.5, 2.5, 3.5], pa.float32()), pa.array([True, None, False]), pa.array([True, False, True]),
], ids=lambda values: f"{values.type}{'-nulls' if values.null_count else ''}")
def test_a_packs_columns_read_as_pysparks_own_conversion_reads_the_rows_columns(values):
    """``fold.PACKS``: for these types pandas reads a pack's Arrow column as PySpark
    converts the same column of rows for ``applyInPandasWithState``."""
    from pyspark.sql.conversion import ArrowBatchTransformer

    (pyspark,) = ArrowBatchTransformer.to_pandas(pa.record_batch([values], names=["v"]), timezone="UTC")
    ours = pa.chunked_array([values]).to_pandas()
    pd.testing.assert_series_equal(ours, pyspark, check_names=False)


def test_the_next_micro_batchs_watermark_is_the_time_every_partition_reached_less_the_delay_never_back():
    assert next_watermark_ms(0, 250, 0) == 250  # a message at it is in order
    assert next_watermark_ms(0, 250, 100) == 150
    assert next_watermark_ms(300, 250, 0) == 300
    assert next_watermark_ms(7, 0, 0) == 7


def test_a_groups_kinds_decide_what_its_rows_are_not_their_nulls():
    # A message's key may be null and its value 0, as a filler's; its kind says it is one.
    rows = decode([spark_rows([Kind.MESSAGE, Kind.HEARTBEAT], [None, None], [7, None], [0, 0], [None, None], [0, -1])])
    assert rows.messages.to_dict("list") == {"key": [None], "timestamp": [7], "value": [0]}


def test_sparks_watermark_delay_is_the_jobs_and_the_lag():
    assert spark_delay(0) == f"{WATERMARK_LAG_MS} milliseconds" == "1 milliseconds"
    newest_ms, delay_ms = 500, 30
    spark_watermark_ms = newest_ms - int(spark_delay(delay_ms).split()[0])
    assert job_watermark_ms(spark_watermark_ms) == newest_ms - delay_ms  # a message at it is in order


@given(st.integers(3, 10**6), st.integers(0, 10**6))
def test_a_groups_timeout_fires_once_the_jobs_watermark_reaches_its_time(time_ms, watermark_ms):
    spark_watermark_ms = watermark_ms - WATERMARK_LAG_MS
    fires = timeout_ms(time_ms) < spark_watermark_ms  # Spark fires a timeout its watermark has passed
    assert job_watermark_ms(spark_watermark_ms) == watermark_ms
    assert fires == (watermark_ms >= time_ms)


def test_a_groups_watermark_is_the_one_the_driver_gave_else_sparks_never_before_the_restore_point():
    assert group_watermark_ms(99, 0) == job_watermark_ms(99) == 100
    assert group_watermark_ms(99, 100) == 100
    assert group_watermark_ms(99, 101) == 101
    assert group_watermark_ms(-(2**63), 0) == 0
    assert group_watermark_ms(99, 0, 40) == 40  # Spark's runs ahead while a partition is behind
    assert group_watermark_ms(99, 50, 40) == 50


def test_a_timeout_is_at_least_1_ms():
    assert timeout_ms(1) == timeout_ms(2) == 1
