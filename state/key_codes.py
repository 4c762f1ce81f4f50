"""Key codes: a column of keys numbered by first appearance, so that a table hashes its
keys about once per batch and works on integers after that.

``factorize_keys`` numbers the keys (a null key, ``None`` or NaN, is a key like any
other); ``first_rows`` finds the first row of each code again without hashing a key.

A table of millions of keys would still hash them all at every batch; ``KeyIds``
hashes each key once, when first met, and gives it an id it keeps: a batch then
hashes only its own keys, and ``first_appearance`` numbers ids (or any small
integers) by first appearance with a few passes of numpy, without hashing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pandas._libs import lib
from pandas._libs.hashtable import Int64HashTable, Int64Vector, ObjectFactorizer

__all__ = ["factorize_keys", "first_rows", "distinct_below", "first_appearance", "pair_codes", "codes_on", "KeyIds", "StringIds",
           "GROUPS_ONE_BY_ONE"]


def factorize_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(keys, use_na_sentinel=False)``: codes numbered by first appearance,
    a null key (``None``, NaN) a key like any other. Without nulls, which is the usual
    case, pandas' default path gives the same and skips its scan for nulls of an object
    array first, a third of the time."""
    codes, unique_keys = pd.factorize(keys)
    if len(codes) and codes.min() < 0:
        return pd.factorize(keys, use_na_sentinel=False)
    return codes, unique_keys


def first_rows(codes: np.ndarray) -> np.ndarray:
    """Index of the first row of each code, for codes numbered by first appearance: the
    rows whose code is above every code before them (no sort)."""
    if not len(codes):
        return np.empty(0, dtype=np.intp)
    highest = np.maximum.accumulate(codes)
    new = np.empty(len(codes), dtype=bool)
    new[0] = True
    np.greater(highest[1:], highest[:-1], out=new[1:])
    return np.flatnonzero(new)


def distinct_below(values: np.ndarray, bound: int) -> np.ndarray:
    """``np.unique(values)`` of integers from 0 below ``bound``: marked in ``bound``
    flags, then read in order, which costs a fraction of sorting where ``bound`` is not
    far above the number of values (or of numpy's unique of integers)."""
    marked = np.zeros(bound, dtype=bool)
    marked[values] = True
    return np.flatnonzero(marked)


def first_appearance(values: np.ndarray, bound: int) -> np.ndarray:
    """``pd.factorize(values)[0]`` for integers from 0 up to ``bound``: codes numbered by
    first appearance. Where ``bound`` is not far above the number of values, an array of
    ``bound`` slots finds each value's first row, which costs a fraction of hashing."""
    rows = len(values)
    if not _slots_fit(bound, rows):
        return pd.factorize(values)[0]
    row = np.arange(rows)
    first = np.full(bound, rows, dtype=np.intp)
    np.minimum.at(first, values, row)
    first_of_row = first[values]
    # A value's code is the number of first rows before its first row.
    return (np.cumsum(first_of_row == row) - 1)[first_of_row]


def _slots_fit(bound: int, rows: int) -> bool:
    """Whether ``first_appearance`` numbers ``rows`` values below ``bound`` in an array of
    ``bound`` slots (not far above the rows) rather than by hashing."""
    return bound <= 4 * rows + 1024


#: The most groups ``pair_codes`` numbers one by one, a pass over the rows each.
GROUPS_ONE_BY_ONE = 8


def pair_codes(codes: np.ndarray, n_codes: int, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """``first_appearance`` of the pairs (``codes``, ``groups``), codes below ``n_codes``
    and groups below ``n_groups``. Where the pairs would need too many slots, each group's
    codes are numbered on their own first when the groups are few (a table's buckets
    without a window: most rows in one), then the pairs by those numbers; else the
    pairs are hashed (``first_appearance``)."""
    slots = n_codes * n_groups
    if not _slots_fit(slots, len(codes)) and n_groups <= GROUPS_ONE_BY_ONE:
        within = np.empty(len(codes), dtype=np.intp)
        numbered = 0
        for group in range(n_groups):
            rows = np.flatnonzero(groups == group)
            local = first_appearance(codes[rows], n_codes)
            within[rows] = numbered + local
            numbered += int(local.max(initial=-1)) + 1
        return first_appearance(within, numbered)
    return first_appearance(codes.astype(np.int64) * n_groups + groups, slots)


class KeyIds:
    """Ids of keys: each key gets the next id (from 0) when first met and keeps it for as
    long as this object lives; a null key (``None``, NaN) is one key. The tables of one
    lineage (a table, its copies and what is rolled forward from them) share one, so a
    batch hashes only its own keys. Ids are never taken back: keys a table drops keep
    theirs, and meeting them again finds them.

    While every key is a string, they are found in a ``StringIds``; the first key that
    is not (a null key, a number) moves them into pandas' hash table of objects, whose
    equality is Python's (``1`` and ``1.0`` are one key)."""

    _NULL = object()  # the null key's stand-in in the hash table

    def __init__(self) -> None:
        self._strings: StringIds | None = StringIds()
        self._factorizer: ObjectFactorizer | None = None

    def __len__(self) -> int:
        """How many ids there are: every id is below this."""
        return len(self._strings) if self._strings is not None else self._factorizer.get_count()

    @property
    def strings_only(self) -> bool:
        """Whether every key met is a string (as when none is)."""
        return self._strings is not None

    def of(self, keys: np.ndarray, distinct: bool = False, admit=None) -> np.ndarray:
        """The ids of ``keys``, giving new keys the next ones; ``distinct``: no key comes
        twice (a table's committed rows), which makes indexing them cheaper. A key that
        cannot be hashed raises, and the ids are as they were. ``admit(keys)`` is called
        before the first keys that are not all strings leave the strings' index: where it
        raises, they do not."""
        keys = np.asarray(keys).astype(object, copy=False)
        if self._strings is not None:
            if not len(keys) or lib.is_string_array(keys, skipna=False):
                return self._strings.of(keys, distinct)
            if admit is not None:
                admit(keys)
            self._factorizer = ObjectFactorizer(max(1024, len(self._strings)))
            self._factorizer.factorize(self._strings.keys())
            self._strings = None
        try:
            ids = self._factorizer.factorize(keys)
        except BaseException:
            # The keys hashed before the failure are in the table but not counted: the
            # next new keys would take their ids. Only the counted keys are kept.
            known = self._factorizer.uniques.to_array()[:len(self)]
            self._factorizer = ObjectFactorizer(max(1024, len(known)))
            self._factorizer.factorize(known)
            raise
        nulls = ids < 0
        if nulls.any():
            ids[nulls] = self._factorizer.factorize(np.array([self._NULL], dtype=object))[0]
        return ids

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The ids of ``keys`` met before, -1 for the others, which get none: a lookup
        leaves the ids as they were (keys of other kinds than strings, never met while
        every key met is a string, do not move them out of the strings' index). A key
        that cannot be hashed raises ``TypeError``."""
        keys = np.asarray(keys).astype(object, copy=False)
        if self._strings is not None:
            if lib.is_string_array(keys, skipna=False):
                return self._strings.find(keys)
            ids = np.full(len(keys), -1, dtype=np.int64)
            strings = np.fromiter((isinstance(key, str) for key in keys), dtype=bool, count=len(keys))
            for key in keys[~strings]:
                hash(key)  # a key that cannot be hashed is refused whatever the table holds
            ids[strings] = self._strings.find(keys[strings])
            return ids
        nulls = pd.isna(keys)
        if nulls.any():
            keys = keys.copy()
            keys[nulls] = self._NULL
        return self._factorizer.table.lookup(keys).astype(np.int64, copy=False)


class StringIds:
    """Ids of strings, as ``KeyIds`` gives them, from a hash table (pandas'
    ``Int64HashTable``, in C) of their 64-bit hashes (``_hashes``) to their ids, and the
    keys by id.

    A batch's keys are hashed, their hashes looked up in one pass of C, and each key
    found is compared with the key its id holds: a lookup costs about a comparison of two
    strings, not the chain of pointers to objects of a hash table of Python objects.
    New keys are numbered and indexed in one more pass (``Int64HashTable.get_labels``),
    a third to a fourth of the time that probing slots from numpy took (1.9 CPU seconds
    for 6,250,000). The millions of keys of a decoded checkpoint, distinct and none
    held, are indexed at once into an index sized for them (``_index_all``): 0.8 to 1.0
    seconds for 6,300,000 against 1.4 to 1.8 numbered by first appearance. Two keys of one
    hash (a chance of one in 2**64 for two keys) are told apart by their keys: the hash
    finds the first, and the later ones are found by key in a dict (``_apart``). The
    index takes 16 bytes a slot and keeps its slots at most 77 % full: 21 to 42 bytes a
    key, besides the key by id.

    The index is derived from the keys: an update of it that fails part way (out of
    memory) drops it, and it is built again from the keys when next needed, so the
    ids stay as they were."""

    def __init__(self) -> None:
        self._index: Int64HashTable | None = Int64HashTable()  # hash -> id; None: to be built again
        self._apart: dict[str, int] = {}  # the ids of keys whose hash an earlier key has
        self._keys = np.empty(1024, dtype=object)  # by id
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __reduce__(self):
        """Pickled (and deep-copied) as its keys, the index built again from them."""
        return _string_ids_of, (self.keys(),)

    def keys(self) -> np.ndarray:
        """The keys, by id."""
        return self._keys[:self._count]

    def of(self, keys: np.ndarray, distinct: bool = False) -> np.ndarray:
        """The ids of ``keys`` (strings), giving new keys the next ones by first
        appearance; ``distinct``: no key comes twice."""
        hashes = _hashes(keys)
        if not self._count and distinct and self._index_all(keys, hashes):
            return np.arange(len(keys))
        ids = self._find(keys, hashes)
        missing = np.flatnonzero(ids < 0)
        if len(missing):
            new = slice(None) if len(missing) == len(keys) else missing  # all: no copy (a decoded table's keys)
            try:
                ids[new] = self._add(keys[new], hashes[new])
            except BaseException:
                self._index = None  # it may hold ids of keys not added
                raise
        return ids

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The ids of ``keys`` (strings) held, -1 for the others."""
        return self._find(keys, _hashes(keys))

    def _find(self, keys: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """The ids of ``keys`` whose hashes are ``hashes``; -1 for keys not held."""
        if not self._count:
            return np.full(len(keys), -1, dtype=np.int64)
        ids = self._built().lookup(hashes).astype(np.int64, copy=False)
        held = np.flatnonzero(ids >= 0)
        other = held[self._keys[ids[held]] != keys[held]]
        if len(other):
            ids[other] = [self._apart.get(key, -1) for key in keys[other]]
        return ids

    def _built(self) -> Int64HashTable:
        """The index, built again from the keys if an update of it failed."""
        if self._index is None:
            fresh = _string_ids_of(self.keys())
            self._index, self._apart = fresh._index, fresh._apart
        return self._index

    def _index_all(self, keys: np.ndarray, hashes: np.ndarray) -> bool:
        """Where none is held, gives ``keys`` (distinct) of ``hashes`` the ids from 0 in
        their order, if no two of them share a hash (else changes nothing and returns
        False): one pass of C storing each hash's id into an index sized for them all,
        which neither grows nor numbers them by first appearance as ``_add`` does."""
        index = Int64HashTable(len(hashes))
        index.map_keys_to_values(hashes, np.arange(len(hashes)))
        if len(index) < len(hashes):
            return False
        self._append(keys)
        self._index, self._apart = index, {}  # none apart: of a batch that failed, if any
        return True

    def _add(self, keys: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """Gives ``keys``, none held (a key may come more than once), the next ids by
        first appearance, and returns them."""
        count = self._count
        codes = _label(self._built(), hashes, count) - count
        first = first_rows(codes)
        if codes.min(initial=0) < 0 or not _one_key_a_code(keys, codes, first):
            # A new key of a held key's hash, or two new keys of one hash: by key.
            self._index, codes = None, pd.factorize(keys)[0]
            first = first_rows(codes)
            index = self._built()  # the held keys' index, and the dict apart it goes with
            _index_apart(index, self._apart, keys[first], hashes[first], count)
        self._append(keys if len(first) == len(keys) else keys[first])  # each key once: no copy
        return count + codes

    def _append(self, keys: np.ndarray) -> None:
        """Holds ``keys`` under the next ids."""
        count = self._count + len(keys)
        if count > len(self._keys):
            grown = np.empty(max(count, 2 * len(self._keys)), dtype=object)
            grown[:self._count] = self._keys[:self._count]
            self._keys = grown
        self._keys[self._count:count] = keys
        self._count = count


def _hashes(keys: np.ndarray) -> np.ndarray:
    """Python's hash of each of ``keys`` (strings): SipHash of its characters, about
    twice as fast as pandas' ``hash_array`` of their UTF-8 bytes (0.31 against 0.58 s for
    5,700,000 keys) and defined for any string, a lone surrogate too. Its seed may differ
    from process to process: an index of them stays in its process (``StringIds``
    pickles as its keys)."""
    return np.fromiter(map(hash, keys), dtype=np.int64, count=len(keys))


def _string_ids_of(keys: np.ndarray) -> StringIds:
    """The ids of ``keys`` (distinct), numbered in their order: how held keys take
    their ids again (unpickled, or an index built again)."""
    ids = StringIds()
    ids.of(keys, distinct=True)
    return ids


def _label(index: Int64HashTable, hashes: np.ndarray, count: int) -> np.ndarray:
    """Indexes the ``hashes`` that ``index`` does not hold under ids from ``count`` on, by
    first appearance, and returns the id of each (a held hash's is the one it has)."""
    return index.get_labels(hashes, Int64Vector(), count, -1)


def _one_key_a_code(keys: np.ndarray, codes: np.ndarray, first: np.ndarray) -> bool:
    """Whether the rows of each code (numbered by first appearance; ``first``, the
    first row of each) hold one key: each row after a code's first is compared with
    that one."""
    again = np.ones(len(codes), dtype=bool)
    again[first] = False
    again = np.flatnonzero(again)
    return not (keys[first[codes[again]]] != keys[again]).any()


def _index_apart(index: Int64HashTable, apart: dict, keys: np.ndarray, hashes: np.ndarray, count: int) -> None:
    """Indexes ``keys`` (new, distinct) of ``hashes`` under ids from ``count`` on: by hash
    where neither ``index`` nor an earlier one of them has it, else by key in ``apart``."""
    ids = count + np.arange(len(keys))
    taken = (index.lookup(hashes) >= 0) | pd.Series(hashes).duplicated().to_numpy()
    index.map_keys_to_values(hashes[~taken], ids[~taken])
    apart.update(zip(keys[taken].tolist(), ids[taken].tolist()))


def codes_on(codes: np.ndarray, ids: np.ndarray, more: np.ndarray, bound: int, first_new: int = 0) -> np.ndarray:
    """The codes of the ids ``more`` following rows of ``ids`` whose codes are ``codes``
    (numbered by first appearance; every id below ``bound``): an id among ``ids`` takes
    its code, the others the next codes by first appearance, from ``first_new`` or after
    the codes, as ``first_appearance`` of all the rows would number them. Hashes only
    the new ids; rows far fewer than ``bound`` are found by sorting their ids."""
    if _slots_fit(bound, len(ids)):
        code_of = np.full(bound, -1, dtype=np.intp)
        code_of[ids] = codes
        more_codes = code_of[more]
    elif len(ids):
        order = np.argsort(ids, kind="stable")
        at = order[np.searchsorted(ids, more, sorter=order).clip(max=len(ids) - 1)]
        more_codes = np.where(ids[at] == more, codes[at], -1)
    else:
        more_codes = np.full(len(more), -1, dtype=np.intp)
    new = more_codes < 0
    if new.any():
        more_codes[new] = max(first_new, int(codes.max()) + 1 if len(codes) else 0) + pd.factorize(more[new])[0]
    return more_codes
