"""``Room`` and ``Rooms``: columns that grow, and rows only one table holds that it
rewrites, in place; and never a row a copy holds."""

from __future__ import annotations

import numpy as np
import pytest

from monoids import Averaged, Sum
from state.rooms import Room, Rooms
from state.table import KeyedTable

INTERVAL = 100


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_a_column_grows_in_place_and_its_writer_rewrites_what_only_it_wrote():
    rooms = Rooms()
    first = rooms.then("c", ints(1, 2, 3), 3, ints(4))  # copied into a room with space
    second = rooms.then("c", first, 4, ints(5, 6))  # grows into the space
    assert second.tolist() == [1, 2, 3, 4, 5, 6] and np.shares_memory(first, second)
    third = rooms.then("c", second, 2, ints(9), low=1)  # rewrites rows it wrote, from row 1 on
    third[1] = 8
    assert third.tolist() == [1, 8, 9] and np.shares_memory(second, third)


def test_a_copy_holds_its_rows_as_they_were_while_the_table_grows_and_rewrites():
    rooms = Rooms()
    column = rooms.then("c", ints(1, 2), 2, ints(3))
    copy = rooms.copied(len(column))
    grown = rooms.then("c", column, 3, ints(4))  # past every row the copy holds: in place
    assert np.shares_memory(column, grown)
    rewritten = rooms.then("c", grown, 2, ints(7))  # row 2 the copy holds: copied
    assert not np.shares_memory(column, rewritten) and rewritten.tolist() == [1, 2, 7]
    # The copy is another writer: it may not rewrite the rows the table wrote past it.
    mine = copy.then("c", column, 3, ints(5))
    assert column.tolist() == [1, 2, 3] and mine.tolist() == [1, 2, 3, 5]
    assert grown.tolist() == [1, 2, 3, 4] and not np.shares_memory(mine, grown)


def test_rooms_handed_over_write_as_their_table_did_and_the_table_then_writes_apart():
    rooms = Rooms()
    column = rooms.then("c", ints(1, 2), 2, ints(3))
    taker = rooms.handed_over()
    rewritten = taker.then("c", column, 2, ints(9), low=0)  # rows the table wrote: in place
    rewritten[0] = 8
    assert rewritten.tolist() == [8, 2, 9] and np.shares_memory(rewritten, column)
    apart = rooms.then("c", column[:2], 2, ints(4))  # the table may no longer write there
    assert apart.tolist() == [8, 2, 4] and not np.shares_memory(apart, rewritten)
    assert rewritten.tolist() == [8, 2, 9]


def test_a_column_another_array_holds_is_copied_and_records_keep_their_dtype():
    rooms, given = Rooms(), ints(1, 2)
    assert not np.shares_memory(rooms.then("c", given, 2, ints(3)), given)
    records = Averaged().zeros(2)
    records["count"] = 1
    more = Averaged().zeros(1)
    grown = rooms.then("r", records, 2, more)
    assert grown.dtype == records.dtype and grown["count"].tolist() == [1, 1, 0]


def test_a_room_without_a_writer_grows_only_past_every_row_written():
    room = Room(np.empty(4, dtype=object), 0)
    room, head = room.then(room.array, 0, np.array(["a", "b"], dtype=object))
    same, longer = room.then(head, 2, np.array(["c"], dtype=object))
    other, apart = room.then(head, 2, np.array(["x"], dtype=object))  # row 2 is written
    assert same is room and other is not room
    assert longer.tolist() == ["a", "b", "c"] and apart.tolist() == ["a", "b", "x"]


def test_a_batch_continued_from_a_snapshot_grows_the_columns_in_place_and_leaves_the_snapshot():
    table = KeyedTable(Sum(), INTERVAL)
    keys = np.array([f"k{i}" for i in range(50)], dtype=object)
    table.update(keys, np.zeros(50, dtype=np.int64), np.ones(50, dtype=np.int64))
    table.checkpoint(INTERVAL)
    snapshot, before = table.copy(), table.encode()
    ids, buckets = table._row_ids(), table.buckets
    table.update(np.array(["k1", "new"], dtype=object), ints(150, 160), ints(5, 7))
    table.checkpoint_changes(2 * INTERVAL)
    # The ids and buckets of the committed rows are not copied; the values are, as the
    # checkpoint changes k1's, which the snapshot holds.
    assert np.shares_memory(table._row_ids(), ids) and np.shares_memory(table.buckets, buckets)
    assert not np.shares_memory(table.values, snapshot.values)
    assert snapshot.encode() == before and table.get("k1") == 6 and table.get("new") == 7
    # A batch continued from the snapshot again (a retry) writes beside the first.
    retried = snapshot.copy()
    retried.update(np.array(["other"], dtype=object), ints(170), ints(9))
    retried.checkpoint_changes(2 * INTERVAL)
    assert table.get("new") == 7 and table.get("other") == 0 and retried.get("other") == 9
    assert retried.get("new") == 0 and snapshot.encode() == before


def test_a_savepoint_gives_the_table_back_after_an_update_in_place():
    table = KeyedTable(Sum(), INTERVAL)
    keys = np.array(["a", "c", *(f"k{i}" for i in range(30))], dtype=object)  # room for 16 more rows
    table.update(keys, ints(10, 150, *[20] * 30), ints(1, 3, *[2] * 30))
    table.checkpoint(INTERVAL)  # a and the k's committed, c after the checkpoint
    before, ids = table.encode(), table._row_ids()
    back = table.savepoint()
    table.update(np.array(["c", "a", "d"], dtype=object), ints(160, 170, 180), ints(10, 20, 30))
    assert np.shares_memory(table._row_ids(), ids)  # grown in place over c's row
    again = back()
    assert again.encode() == before and again.get("a") == 1 and again.get("c") == 3
    table.checkpoint(2 * INTERVAL)  # the table given up writes apart from then on
    assert table.get("a") == 21 and again.encode() == before


def test_a_checkpoint_after_an_update_under_a_savepoint_commits_in_place():
    table = KeyedTable(Sum(), INTERVAL)
    keys = np.array(["a", *(f"k{i}" for i in range(30))], dtype=object)
    table.update(keys, ints(10, *[20] * 30), ints(1, *[2] * 30))
    table.checkpoint(INTERVAL)
    values = table.values
    back = table.savepoint()
    table.update(np.array(["a", "d"], dtype=object), ints(170, 180), ints(20, 30))
    table.checkpoint(2 * INTERVAL)  # a's committed row rewritten, where only the table holds it
    assert np.shares_memory(table.values, values) and table.get("a") == 21 and table.get("d") == 30
    with pytest.raises(RuntimeError, match="checkpoint"):
        back()  # the savepoint is of the rows before the checkpoint, which went
