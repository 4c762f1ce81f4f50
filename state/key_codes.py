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
from pandas._libs.hashtable import ObjectFactorizer
from pandas.util import hash_array

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

    def of(self, keys: np.ndarray) -> np.ndarray:
        """The ids of ``keys``, giving new keys the next ones. A key that cannot be hashed
        raises, and the ids are as they were."""
        keys = np.asarray(keys).astype(object, copy=False)
        if self._strings is not None:
            if not len(keys) or lib.is_string_array(keys, skipna=False):
                try:
                    return self._strings.of(keys)
                except UnicodeEncodeError:  # a string UTF-8 cannot encode (a lone surrogate)
                    pass
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


class StringIds:
    """Ids of strings, as ``KeyIds`` gives them, from an index of their 64-bit hashes
    (pandas' ``hash_array`` of their UTF-8 bytes) in numpy arrays, by open addressing.

    A slot holds an id (plus one: 0 is an empty slot) and its key's hash's upper 32 bits;
    a key's probe starts at the slot of its hash's lower bits and goes on to the next
    slot until it meets an empty one or a slot whose bits match and whose key is equal.
    All keys of a batch probe together, a pass of numpy a step, so a lookup costs about
    a comparison of two strings, not the chain of pointers to objects of a hash table of
    Python objects (about twice as fast in a table of millions of keys). A slot takes
    eight bytes and at most half the slots are taken: 16 to 32 bytes a key, and the
    key and its hash (8 bytes), by id, so that growing places the keys again without
    hashing them."""

    def __init__(self) -> None:
        self._ids = np.zeros(1024, dtype=np.uint32)  # id + 1 a slot, 0 where empty
        self._bits = np.zeros(1024, dtype=np.uint32)  # the upper bits of the slot's key's hash
        self._keys = np.empty(1024, dtype=object)  # by id
        self._hashes = np.empty(1024, dtype=np.uint64)  # by id: growing places them again without hashing
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def keys(self) -> np.ndarray:
        """The keys, by id."""
        return self._keys[:self._count]

    def of(self, keys: np.ndarray) -> np.ndarray:
        """The ids of ``keys`` (strings), giving new keys the next ones by first
        appearance."""
        hashes = hash_array(keys, categorize=False)
        ids = self._find(keys, hashes)
        missing = np.flatnonzero(ids < 0)
        if len(missing):
            codes, first = _codes_of_strings(keys[missing], hashes[missing])
            first = missing[first]
            ids[missing] = self._count + codes
            self._add(keys[first], hashes[first])
        return ids

    def _find(self, keys: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """The ids of ``keys`` whose hashes are ``hashes``; -1 for keys not held."""
        mask = len(self._ids) - 1
        slots, bits = _slots_and_bits(hashes, mask)
        found = np.full(len(keys), -1, dtype=np.int64)
        probing = np.arange(len(keys))
        while len(probing):
            at = slots[probing]
            held = self._ids[at]
            matched = np.flatnonzero((held != 0) & (self._bits[at] == bits[probing]))
            if len(matched):
                rows, ids = probing[matched], held[matched].astype(np.int64) - 1
                equal = self._keys[ids] == keys[rows]
                found[rows[equal]] = ids[equal]
            probing = probing[(held != 0) & (found[probing] < 0)]
            slots[probing] = (slots[probing] + 1) & mask
        return found

    def _add(self, keys: np.ndarray, hashes: np.ndarray) -> None:
        """Gives ``keys`` (new, distinct) the next ids, in their order. Where that fails
        part way (out of memory), the ids are as they were."""
        count = self._count + len(keys)
        if count >= 2**32 - 1:
            raise OverflowError(f"a table of more than {2**32 - 2:,} keys")
        if count > len(self._keys):
            room = max(count, 2 * len(self._keys))
            self._keys, self._hashes = _grown(self._keys, self._count, room), _grown(self._hashes, self._count, room)
        self._keys[self._count:count], self._hashes[self._count:count] = keys, hashes
        if 2 * count > len(self._ids):
            # Twice the slots, or more: every key held so far goes into its slot again.
            slots = 1 << (2 * count - 1).bit_length()
            ids, bits = np.zeros(slots, dtype=np.uint32), np.zeros(slots, dtype=np.uint32)
            _place(ids, bits, np.arange(count), self._hashes[:count])
            self._ids, self._bits = ids, bits
        else:
            try:
                _place(self._ids, self._bits, np.arange(self._count, count), hashes)
            except BaseException:
                # The new ids came last: no probe for an older key passes their slots.
                self._ids[self._ids > self._count] = 0
                raise
        self._count = count


def _grown(column: np.ndarray, used: int, room: int) -> np.ndarray:
    """A new array of ``room`` elements starting with the first ``used`` of ``column``."""
    grown = np.empty(room, dtype=column.dtype)
    grown[:used] = column[:used]
    return grown


def _slots_and_bits(hashes: np.ndarray, mask: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each key's probe starts (its hash's lower bits, below ``mask``, a power of
    two less one) and the upper 32 bits of its hash, which its slot holds."""
    return (hashes & np.uint64(mask)).astype(np.intp), (hashes >> np.uint64(32)).astype(np.uint32)


def _place(slot_ids: np.ndarray, slot_bits: np.ndarray, ids: np.ndarray, hashes: np.ndarray) -> None:
    """Puts ``ids`` into the first empty slot from their hashes' on (``StringIds``);
    where two take the same slot in one step, one of them has it and the other goes on."""
    mask = len(slot_ids) - 1
    slots, bits = _slots_and_bits(hashes, mask)
    placing = np.arange(len(ids))
    while len(placing):
        at = slots[placing]
        empty = slot_ids[at] == 0
        taking, at = placing[empty], at[empty]
        slot_ids[at] = ids[taking] + 1
        took = slot_ids[at] == ids[taking] + 1
        slot_bits[at[took]] = bits[taking[took]]
        placed = np.zeros(len(ids), dtype=bool)
        placed[taking[took]] = True
        placing = placing[~placed[placing]]
        slots[placing] = (slots[placing] + 1) & mask


def _codes_of_strings(keys: np.ndarray, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(keys)[0]`` of strings whose hashes are ``hashes`` (by the hashes,
    unless two different keys share one) and the first row of each code."""
    codes, _ = pd.factorize(hashes)
    first = first_rows(codes)
    if (keys[first][codes] == keys).all():
        return codes, first
    codes = pd.factorize(keys)[0]
    return codes, first_rows(codes)


def codes_on(codes: np.ndarray, ids: np.ndarray, more: np.ndarray, bound: int) -> np.ndarray:
    """The codes of the ids ``more`` following rows of ``ids`` whose codes are ``codes``
    (numbered by first appearance; every id below ``bound``): an id among ``ids`` takes
    its code, the others the next codes by first appearance, as ``first_appearance`` of
    all the rows would number them. Hashes only the new ids."""
    code_of = np.full(bound, -1, dtype=np.intp)
    code_of[ids] = codes
    more_codes = code_of[more]
    new = more_codes < 0
    if new.any():
        more_codes[new] = (int(codes.max()) + 1 if len(codes) else 0) + pd.factorize(more[new])[0]
    return more_codes
