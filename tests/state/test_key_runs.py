"""``KeyRuns`` against a dict: after any batches and merges a store finds each key's
newest record and reads every key once, with real hashes and with hashes that many keys
share, merging whole or a few rows of each run at a time; its files go with its runs."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiles import examples

import state.key_runs
from persistent.storage.local_runs import LocalRuns
from state.key_runs import KeyRuns, key_hashes

RECORD = np.dtype([("value", "<i8"), ("place", "<i8")])

#: Keys of each kind, few enough that batches meet keys again.
KEYS = {
    "str": st.text("abcdé", max_size=4),
    "bytes": st.binary(max_size=3),
    "int": st.integers(-(2 ** 63), 2 ** 63 - 1) | st.integers(-20, 20),
}


def few_hashes(keys: np.ndarray) -> np.ndarray:
    """Hashes of four values: most keys share theirs with others."""
    return key_hashes(keys) % np.uint64(4) << np.uint64(60)


def as_array(keys: list, kind: str) -> np.ndarray:
    return np.array(keys, dtype=np.int64) if kind == "int" else np.array(keys, dtype=object)


#: A step: a batch of keys (a key may come twice) with values, or a merge of the runs from one on.
STEP = st.one_of(st.tuples(st.just("batch"), st.lists(st.integers(0, 1000), max_size=40)),
                 st.tuples(st.just("merge"), st.integers(0, 4)))


@pytest.mark.parametrize("in_parts", [False, True], ids=["whole", "in parts"])
@pytest.mark.parametrize("hashing", [key_hashes, few_hashes], ids=["hashes", "shared hashes"])
@pytest.mark.parametrize("kind", sorted(KEYS))
def test_a_store_finds_the_newest_record_of_each_key_after_batches_and_merges(kind, hashing, in_parts, tmp_path,
                                                                            monkeypatch):
    if in_parts:
        monkeypatch.setattr(state.key_runs, "_PART_ROWS", 2)

    @settings(max_examples=examples(30))  # each of 12 cases
    @given(st.lists(KEYS[kind], min_size=1, max_size=60, unique=True),
           st.lists(STEP, max_size=8))
    def check(keys, steps):
        store, held = KeyRuns(LocalRuns(str(tmp_path)), RECORD, kind, hashing), {}
        for step, (what, argument) in enumerate(steps):
            if what == "merge":
                store = store.merged(argument)
                continue
            batch = [keys[i % len(keys)] for i in argument]
            records = np.array([(value, step) for value in argument], dtype=RECORD)
            store = store.then(as_array(batch, kind), records)
            held.update(zip(batch, records.tolist()))  # a key's last record
            found, got = store.find(as_array(keys, kind))
            assert found.tolist() == [key in held for key in keys]
            assert [tuple(record) for record in got[found].tolist()] == [held[key] for key in keys if key in held]
        items = [(key, tuple(record)) for part_keys, records in store.items()
                 for key, record in zip(part_keys.tolist(), records.tolist())]
        assert sorted(items, key=repr) == sorted(held.items(), key=repr)

    check()


def test_merging_the_newer_runs_keeps_the_older_ones_and_every_record(tmp_path):
    store = KeyRuns(LocalRuns(str(tmp_path)), RECORD, "str")
    for batch in range(4):
        keys = np.array([f"k{i}" for i in range(batch * 5, batch * 5 + 10)], dtype=object)
        store = store.then(keys, np.array([(batch, i) for i in range(10)], dtype=RECORD))
    newer = store.merged(2)
    assert (store.run_rows(), newer.run_rows()) == ([10, 10, 10, 10], [10, 10, 15])
    everything = newer.merged()
    assert everything.run_rows() == [25]
    for merged in (newer, everything):
        found, records = merged.find(np.array(["k0", "k9", "k24", "k25"], dtype=object))
        assert found.tolist() == [True, True, True, False]
        assert records[:3].tolist() == [(0, 0), (1, 4), (3, 9)]


def test_a_runs_files_go_when_no_store_holds_it(tmp_path):
    store = KeyRuns(LocalRuns(str(tmp_path)), RECORD, "int")
    store = store.then(np.arange(5), np.zeros(5, dtype=RECORD))
    before = store
    store = store.then(np.arange(3, 8), np.ones(5, dtype=RECORD))
    assert len(os.listdir(tmp_path)) == 6
    store = store.merged()
    gc.collect()
    assert len(os.listdir(tmp_path)) == 6  # the merged run's, and the first's, which an older store holds
    del before
    gc.collect()
    assert len(os.listdir(tmp_path)) == 3
    assert store.find(np.arange(9))[0].tolist() == [True] * 8 + [False]


def test_a_store_refuses_a_kind_it_does_not_hold_and_records_not_matching_keys(tmp_path):
    with pytest.raises(ValueError, match="keys of kind 'float'; a store holds one of str, bytes, int"):
        KeyRuns(LocalRuns(str(tmp_path)), RECORD, "float")
    with pytest.raises(ValueError, match="2 keys and 1 records"):
        KeyRuns(LocalRuns(str(tmp_path)), RECORD, "str").then(np.array(["a", "b"], dtype=object), np.zeros(1, dtype=RECORD))
