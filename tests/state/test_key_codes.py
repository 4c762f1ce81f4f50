"""Key codes: ``factorize_keys`` numbers keys as pandas does with nulls as keys, and
``first_rows`` finds where it first met each; ``first_appearance``, ``pair_codes`` and
``codes_on`` number integers as pandas would without hashing them, and ``KeyIds`` keeps
each key's id, strings in an index of their hashes (``StringIds``) as objects would be."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pandas._libs.hashtable import ObjectFactorizer

import state.key_codes
from state.key_codes import (GROUPS_ONE_BY_ONE, KeyIds, StringIds, codes_on, distinct_below, factorize_keys,
                             first_appearance, first_rows, pair_codes)


@given(st.lists(st.one_of(st.sampled_from(["a", "b", "c"]), st.none(), st.just(float("nan")), st.integers(0, 3)),
                max_size=30))
def test_keys_factorize_as_pandas_does_with_nulls_as_keys(keys):
    array = np.array(keys, dtype=object)
    codes, unique_keys = factorize_keys(array)
    expected_codes, expected_keys = pd.factorize(array, use_na_sentinel=False)
    np.testing.assert_array_equal(codes, expected_codes)
    assert list(map(repr, unique_keys)) == list(map(repr, expected_keys))


def test_integer_keys_factorize_as_pandas_does():
    keys = np.array([5, 3, 5, 9, 3], dtype=np.int64)
    codes, unique_keys = factorize_keys(keys)
    assert codes.tolist() == [0, 1, 0, 2, 1] and unique_keys.tolist() == [5, 3, 9]


@given(st.lists(st.integers(0, 20), max_size=60))
def test_the_first_row_of_each_key_is_where_factorize_first_met_it(values):
    codes, _ = pd.factorize(np.array(values, dtype=np.int64))
    _, expected = np.unique(codes, return_index=True)
    np.testing.assert_array_equal(first_rows(codes), expected)


@given(st.lists(st.integers(0, 40), max_size=60), st.integers(41, 100))
def test_distinct_integers_are_those_of_numpy_in_order(values, bound):
    array = np.array(values, dtype=np.int64)
    np.testing.assert_array_equal(distinct_below(array, bound), np.unique(array))


@given(st.lists(st.integers(0, 40), max_size=60), st.sampled_from([41, 10**6]))
def test_small_integers_number_by_first_appearance_as_pandas_does_in_slots_or_by_hashing(values, bound):
    array = np.array(values, dtype=np.int64)
    np.testing.assert_array_equal(first_appearance(array, bound), pd.factorize(array)[0])


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 11)), max_size=60), st.sampled_from([31, 10**6]),
       st.sampled_from([6, GROUPS_ONE_BY_ONE + 4]))
def test_pairs_number_by_first_appearance_as_pandas_does_in_slots_group_by_group_or_hashed(pairs, n_codes,
                                                                                           n_groups):
    codes = np.array([c for c, _ in pairs], dtype=np.int64)
    groups = np.array([g % n_groups for _, g in pairs], dtype=np.int64)
    expected, _ = pd.factorize(codes * n_groups + groups)
    np.testing.assert_array_equal(pair_codes(codes, n_codes, groups, n_groups), expected)


@given(st.lists(st.integers(0, 20), max_size=40), st.lists(st.integers(0, 30), max_size=40),
       st.sampled_from([31, 10**6]), st.integers(0, 3))
def test_codes_of_more_ids_go_on_from_the_rows_as_one_numbering_of_all(ids, more, bound, before):
    """In slots, or by sorting the rows' ids where they are few of ``bound``; the rows
    may follow ``before`` rows of keys of their own (``first_new``)."""
    ids, more = np.array(ids, dtype=np.int64), np.array(more, dtype=np.int64)
    codes = first_appearance(ids, 31)
    expected, _ = pd.factorize(np.concatenate([ids, more]))
    np.testing.assert_array_equal(np.concatenate([codes, codes_on(codes, ids, more, bound)]), expected)
    np.testing.assert_array_equal(codes_on(before + codes, ids, more, bound, first_new=before),
                                  before + expected[len(ids):])


def test_a_key_keeps_its_id_every_null_is_one_key_and_new_keys_take_the_next_ids():
    ids = KeyIds()
    assert ids.of(np.array(["a", None, "b", float("nan"), "a"], dtype=object)).tolist() == [0, 2, 1, 2, 0]
    assert ids.of(np.array([7, "b", None, "c"], dtype=object)).tolist() == [3, 1, 2, 4]
    assert ids.of(["b"]).tolist() == [1] and len(ids) == 5


def object_ids(batches: list[list]) -> tuple[list[list[int]], int]:
    """The ids of each batch's keys from pandas' hash table of objects alone, nulls as
    ``KeyIds`` counts them, and how many there are."""
    factorizer, null, ids = ObjectFactorizer(8), object(), []
    for batch in batches:
        batch_ids = factorizer.factorize(np.array(batch, dtype=object))
        if (batch_ids < 0).any():
            batch_ids[batch_ids < 0] = factorizer.factorize(np.array([null], dtype=object))[0]
        ids.append(batch_ids.tolist())
    return ids, factorizer.get_count()


#: Keys of a few letters, so that batches meet keys again; now and then one UTF-8 cannot
#: encode (a lone surrogate), or one that is not a string, after which the keys are objects.
KEY = st.one_of(st.text("abcdé", max_size=3), st.text("abcdé", min_size=4, max_size=12),
                st.sampled_from([None, float("nan"), 3, 3.0, "\ud800", b"ab"]))


@given(st.lists(st.lists(KEY, max_size=300), max_size=6))
def test_key_ids_are_those_of_a_hash_table_of_objects_before_and_after_a_key_that_is_no_string(batches):
    ids = KeyIds()
    got = [ids.of(np.array(batch, dtype=object)).tolist() for batch in batches]
    assert (got, len(ids)) == object_ids(batches)


#: The null keys' one key in a dict of the keys held.
NULL_KEY = object()


@given(st.lists(st.tuples(st.lists(KEY, max_size=100), st.lists(KEY, max_size=30)), max_size=5))
def test_keys_found_have_the_ids_they_were_given_and_a_lookup_gives_none(batches):
    """``find`` after each batch: the ids of the keys held, -1 for the others, and the ids
    (their count, and whether every key is found as a string) as they were."""
    ids, held = KeyIds(), {}
    for batch, looked_up in batches:
        for key, key_id in zip(batch, ids.of(np.array(batch, dtype=object)).tolist()):
            held.setdefault(NULL_KEY if pd.isna(key) else key, key_id)
        before = (len(ids), ids.strings_only)
        found = ids.find(np.array(looked_up, dtype=object)).tolist()
        assert found == [held.get(NULL_KEY if pd.isna(key) else key, -1) for key in looked_up]
        assert (len(ids), ids.strings_only) == before


@pytest.mark.parametrize("sizes", [(1, 4000, 0, 900, 3000), (4000, 1, 0, 900, 3000)], ids=["one first", "many first"])
@pytest.mark.parametrize("weak", [False, True], ids=["hashes", "colliding hashes"])
def test_string_ids_of_many_keys_in_batches_are_those_of_a_hash_table_of_objects(weak, sizes, monkeypatch):
    # Weak hashes: every key of a length has one; the index tells them apart by their
    # keys, new keys of a held key's hash (one first) and of one hash (many first).
    if weak:
        monkeypatch.setattr(state.key_codes, "_hashes",
                            lambda keys: np.array([len(key) for key in keys], dtype=np.int64) << 40)
    rng = np.random.default_rng(7)
    batches = [[f"k{key}" for key in rng.integers(0, 5000 if not weak else 300, size)] for size in sizes]
    ids = StringIds()
    got = [ids.of(np.array(batch, dtype=object)).tolist() for batch in batches]
    assert (got, len(ids)) == object_ids(batches)
    assert ids.keys().tolist() == list(dict.fromkeys(key for batch in batches for key in batch))


@pytest.mark.parametrize("keys", ["distinct", "colliding hashes", "repeated"])
def test_string_ids_of_keys_said_distinct_are_those_of_any_keys(keys, monkeypatch):
    # Keys said distinct are indexed at once, unless two share a hash: then, and where
    # they are not distinct after all, as any keys are.
    first = [f"k{i}" for i in range(3000)]
    if keys == "colliding hashes":
        monkeypatch.setattr(state.key_codes, "_hashes",
                            lambda keys: np.array([hash(key) % 2999 for key in keys], dtype=np.int64))
    if keys == "repeated":
        first += first[:10]
    batches = [first, [f"k{i}" for i in range(0, 3030, 3)]]
    ids = StringIds()
    got = [ids.of(np.array(batch, dtype=object), distinct=i == 0).tolist() for i, batch in enumerate(batches)]
    assert (got, len(ids)) == object_ids(batches)
    assert ids.keys().tolist() == list(dict.fromkeys(key for batch in batches for key in batch))


def test_string_ids_pickle_and_copy_as_the_ids_they_hold():
    ids = StringIds()
    ids.of(np.array(["b", "a", "b"], dtype=object))
    for again in (pickle.loads(pickle.dumps(ids)), copy.deepcopy(ids)):
        assert again.of(np.array(["a", "c", "b"], dtype=object)).tolist() == [1, 2, 0]
    assert ids.of(np.array(["d"], dtype=object)).tolist() == [2]


def test_a_new_key_of_a_held_keys_hash_takes_the_next_id(monkeypatch):
    monkeypatch.setattr(state.key_codes, "_hashes", lambda keys: np.full(len(keys), 7, dtype=np.int64))
    ids = StringIds()
    assert [ids.of(np.array(batch, dtype=object)).tolist() for batch in (["a"], ["b"], ["b", "a", "c"])] == [
        [0], [1], [1, 0, 2]]


def _out_of_memory(*_):
    raise MemoryError


@pytest.mark.parametrize("failing", ["indexing", "holding"])
def test_string_ids_that_fail_part_way_through_new_keys_are_as_they_were(failing, monkeypatch):
    ids, held = StringIds(), np.array([f"k{i}" for i in range(300)], dtype=object)
    ids.of(held)
    new = np.array([f"n{i}" for i in range(2000)], dtype=object)  # past the room for 1,024 keys
    label = state.key_codes._label

    def label_half_then_fail(index, hashes, count):
        label(index, hashes[:len(hashes) // 2], count)
        raise MemoryError

    if failing == "indexing":
        monkeypatch.setattr(state.key_codes, "_label", label_half_then_fail)
    else:  # the new keys are indexed, not held
        monkeypatch.setattr(StringIds, "_append", _out_of_memory)
    with pytest.raises(MemoryError):
        ids.of(new)
    monkeypatch.undo()
    assert len(ids) == 300 and ids.of(held).tolist() == list(range(300))
    assert ids.of(new[::-1]).tolist() == list(range(300, 300 + len(new)))


@pytest.mark.parametrize("distinct", [False, True], ids=["any keys", "keys said distinct"])
def test_string_ids_that_failed_holding_their_first_keys_take_new_keys_afresh(distinct, monkeypatch):
    # One hash for all: the first keys are told apart by key, then not held; the keys
    # after them are indexed afresh, the failed ones forgotten.
    monkeypatch.setattr(state.key_codes, "_hashes", lambda keys: np.full(len(keys), 7, dtype=np.int64))
    ids = StringIds()

    append = StringIds._append
    with monkeypatch.context() as failing:  # holding no keys (an index built again) does not fail
        failing.setattr(StringIds, "_append", lambda ids, keys: _out_of_memory() if len(keys) else append(ids, keys))
        with pytest.raises(MemoryError):
            ids.of(np.array(["a", "b"], dtype=object))
    assert [ids.of(np.array([key], dtype=object), distinct).tolist() for key in "cbe"] == [[0], [1], [2]]
    assert ids.keys().tolist() == ["c", "b", "e"]
