"""``StoredTable`` against ``KeyedTable``: under any updates, lookups, checkpoints (of
changes or whole), seals and batches given up, a stored table gives the same totals
and values and writes the same checkpoint bytes as a table holding every row."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples

from monoids import Sum
from persistent.storage.local_runs import LocalRuns
from state.errors import CorruptCheckpointError, StateValueError
from state.stored_table import StoredTable
from state.table import KeyedTable
from state.tables import read_table

INTERVAL = 100

#: Keys of a few letters, so that batches meet keys again; now and then the null key.
KEY = st.one_of(st.text("abcd", max_size=3), st.none())

STEP = st.one_of(
    st.tuples(st.just("update"), st.lists(st.tuples(KEY, st.integers(0, 250), st.integers(-5, 5)), max_size=12)),
    st.tuples(st.just("totals"), st.none()),
    st.tuples(st.just("get"), KEY),
    st.tuples(st.just("changes"), st.none()),
    st.tuples(st.just("whole"), st.none()),
    st.tuples(st.just("seal"), st.none()),
    st.tuples(st.just("encode"), st.none()),
    st.tuples(st.just("given up"), st.lists(st.tuples(KEY, st.integers(0, 250), st.integers(-5, 5)), max_size=5)),
)


def apply(table, messages, base_ms: int) -> None:
    keys = np.empty(len(messages), dtype=object)
    keys[:] = [key for key, _, _ in messages]
    times = np.array([base_ms + offset for _, offset, _ in messages], dtype=np.int64)
    table.update(keys, times, np.array([value for *_, value in messages], dtype=np.int64), touched=False)


@pytest.mark.parametrize("restored", [False, True], ids=["new", "restored"])
def test_a_stored_table_gives_the_totals_and_checkpoints_of_a_table_of_every_row(restored, tmp_path):
    @settings(max_examples=examples(100))
    @given(st.lists(st.tuples(KEY, st.integers(-5, 5)), max_size=20, unique_by=lambda pair: pair[0]),
           st.lists(STEP, max_size=14))
    def check(first, steps):
        whole = KeyedTable(Sum(), INTERVAL)
        if restored:  # the checkpoint of ``first``, decoded
            apply(whole, [(key, 0, value) for key, value in first], 0)
            whole.recover(INTERVAL, whole.checkpoint(INTERVAL))
        stored = StoredTable.of(whole.copy(), LocalRuns(str(tmp_path)))
        for what, argument in steps:
            base_ms = whole.checkpoint_ms
            if what == "update":
                apply(whole, argument, base_ms)
                apply(stored, argument, base_ms)
            elif what == "totals":
                keys, values = whole.take_touched_totals()
                stored_keys, stored_values = stored.take_touched_totals()
                assert (stored_keys.tolist(), stored_values.tolist()) == (keys.tolist(), values.tolist())
            elif what == "get":
                assert stored.get(argument) == whole.get(argument)
            elif what == "encode":
                assert stored.encode() == whole.encode()
            elif what == "given up":
                back_whole, back_stored = whole.savepoint(), stored.savepoint()
                apply(whole, argument, base_ms)
                apply(stored, argument, base_ms)
                whole, stored = back_whole(), back_stored()
            else:
                due = base_ms + INTERVAL
                if what == "changes":
                    assert stored.checkpoint_changes(due) == whole.checkpoint_changes(due)
                elif what == "whole":
                    assert stored.checkpoint(due) == whole.checkpoint(due)
                else:
                    stored.seal(due)
                    whole.seal(due)
            assert (stored.checkpoint_ms, stored.late_count, len(stored)) == \
                   (whole.checkpoint_ms, whole.late_count, len(whole))
        assert stored.committed().encode() == whole.checkpointed_rows().encode()

    check()


def test_a_stored_table_refuses_keys_of_another_kind_and_keeps_its_state(tmp_path):
    stored = StoredTable.of(KeyedTable(Sum(), INTERVAL), LocalRuns(str(tmp_path)))
    apply(stored, [("a", 0, 1)], 0)
    stored.checkpoint(INTERVAL)
    with pytest.raises(StateValueError, match=r"a stored table holds keys of one kind, str or bytes: this update "
                                              r"brings bytes keys \(b'a'\) to a table of str keys"):
        apply(stored, [("b", 100, 1), (b"a", 100, 1)], 0)
    with pytest.raises(StateValueError, match=r"str or bytes: this update brings numeric keys \(1\)$"):
        apply(StoredTable.of(KeyedTable(Sum(), INTERVAL), LocalRuns(str(tmp_path))), [(1, 0, 1)], 0)
    assert stored.get("a") == 1 and stored.get("b") == 0


def test_a_stored_tables_newer_runs_are_merged_and_all_once_they_hold_an_eighth_of_the_first(tmp_path):
    whole = KeyedTable(Sum(), INTERVAL)
    apply(whole, [(f"k{key}", 0, 1) for key in range(80)], 0)
    whole.recover(INTERVAL, whole.checkpoint(INTERVAL))
    stored = StoredTable.of(whole, LocalRuns(str(tmp_path)))
    runs = []
    for key in range(12):  # a new key a checkpoint, a run of one row each
        apply(stored, [(f"new{key}", 0, 1)], stored.checkpoint_ms)
        stored.checkpoint_changes(stored.checkpoint_ms + INTERVAL)
        runs.append(stored.store.run_rows())
    assert runs == [[80, 1], [80, 1, 1], [80, 1, 1, 1], [80, 4], [80, 4, 1], [80, 4, 1, 1], [80, 7], [80, 7, 1],
                    [80, 7, 1, 1], [90], [90, 1], [90, 1, 1]]
    assert [stored.get(key) for key in ("k0", "k79", "new0", "new11", "other")] == [1, 1, 1, 1, 0]


@given(st.lists(st.tuples(KEY, st.integers(-5, 5)), max_size=20),
       st.lists(st.lists(st.tuples(KEY, st.integers(-5, 5)), max_size=12), min_size=1, max_size=5))
@settings(max_examples=examples(100))
def test_a_stored_checkpoint_rolled_forward_by_changes_is_the_checkpoint_they_lead_to(first, batches):
    whole = KeyedTable(Sum(), INTERVAL)
    apply(whole, [(key, 0, value) for key, value in first], 0)
    whole.recover(INTERVAL, whole.checkpoint(INTERVAL))
    with tempfile.TemporaryDirectory() as directory:
        stored = StoredTable.of(whole.copy(), LocalRuns(directory))
        changes = []
        for batch in batches:
            apply(whole, [(key, whole.checkpoint_ms, value) for key, value in batch], 0)
            changes.append(read_table(whole.checkpoint_changes(whole.checkpoint_ms + INTERVAL)))
        stored.roll_forward(*changes)
        assert stored.committed().encode() == whole.checkpointed_rows().encode()
        assert (stored.checkpoint_ms, stored.chain_rows, len(stored)) == (whole.checkpoint_ms, whole.chain_rows,
                                                                          len(whole))


def first_checkpoint() -> KeyedTable:
    table = KeyedTable(Sum(), INTERVAL)
    apply(table, [("a", 0, 1), ("b", 0, 1)], 0)
    table.recover(INTERVAL, table.checkpoint(INTERVAL))
    return table


def test_changes_naming_rows_of_other_keys_or_rows_not_held_are_refused_and_change_nothing(tmp_path):
    whole = first_checkpoint()
    apply(whole, [("b", INTERVAL, 1)], 0)
    changes = read_table(whole.checkpoint_changes(2 * INTERVAL))  # b's row 1
    apply(whole, [("b", 2 * INTERVAL, 1)], 0)
    more = read_table(whole.checkpoint_changes(3 * INTERVAL))
    for held_rows, error in (([0], "name rows of other keys"),
                             ([2], "name rows that the checkpoint they change does not have")):
        stored = StoredTable.of(first_checkpoint(), LocalRuns(str(tmp_path)))
        more.held_rows = np.array(held_rows)
        with pytest.raises(CorruptCheckpointError, match=f"changes of the checkpoint at 300 ms {error}"):
            stored.roll_forward(changes, more)
        assert (stored.committed().encode(), stored.checkpoint_ms) == (first_checkpoint().encode(), INTERVAL)
