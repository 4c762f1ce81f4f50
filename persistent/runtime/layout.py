"""Which of Spark's state partitions holds which key group: an even spread.

``applyInPandasWithState`` shuffles its rows by Spark's hash of the grouping column
(Murmur3, seed 42), modulo the query's number of shuffle partitions, and each
partition's task runs its groups one after another. Grouped by the group's number
itself, the groups spread unevenly: on 2 partitions, groups 0 to 7 fall 5 and 3, on 4
partitions groups 0 to 15 fall 6, 4, 3 and 3. The busiest task sets the micro-batch's
time, so 8 groups on 2 cores took as long as 10 would evenly.

So the query groups by a *slot* instead: key group ``g`` of ``G`` gets the smallest
``g + G * m`` (``m >= 0``) whose hash puts it in partition ``g % P``. The groups then
take the partitions in turn, no partition holding more than one group more than
another, and the group is the slot modulo ``G``. Spark keeps its state by slot, so a
Spark checkpoint is read with the slots it was written with: the job directory
records its generation's partitions (``persistent.storage.records.Generation``),
and a generation recorded before slots existed groups by the group's number
(``partitions`` None).

Nothing here imports Spark; a test checks ``spark_hashes`` against values of Spark's
``hash()``, and a Spark test checks the slots against Spark's shuffle.
"""

from __future__ import annotations

import numpy as np

from persistent.core.errors import ConfigError

__all__ = ["group_slots", "spark_hashes", "slot_group"]

#: Spark's int column holds a slot: the largest one is below this.
_INT_LIMIT = 2**31


def _rotate_left(x: np.ndarray, bits: int) -> np.ndarray:
    return (x << bits) | (x >> (32 - bits))


def spark_hashes(values) -> np.ndarray:
    """Spark's ``hash()`` of an ``int`` column's values (Murmur3 x86 32-bit, seed 42), as
    signed 32-bit ints in an int64 array: what its shuffle partitions rows by. Unsigned
    32-bit arithmetic wraps as Murmur3's does."""
    k1 = np.asarray(values, dtype=np.int64).astype(np.uint32)
    k1 = _rotate_left(k1 * np.uint32(0xCC9E2D51), 15) * np.uint32(0x1B873593)
    h1 = _rotate_left(np.uint32(42) ^ k1, 13) * np.uint32(5) + np.uint32(0xE6546B64)
    h1 ^= np.uint32(4)  # the length in bytes
    h1 = (h1 ^ (h1 >> 16)) * np.uint32(0x85EBCA6B)
    h1 = (h1 ^ (h1 >> 13)) * np.uint32(0xC2B2AE35)
    return (h1 ^ (h1 >> 16)).view(np.int32).astype(np.int64)


def group_slots(key_groups: int, partitions: int | None) -> list[int]:
    """The slot of each key group: the value Spark groups its rows by, so that group
    ``g`` lands in state partition ``g % partitions``. Without ``partitions`` (a Spark
    checkpoint written before slots), each group's slot is its number.

    Each group tries ``g``, ``g + key_groups``, ... until one lands in its partition,
    all groups at once: about ``partitions`` tries each. A slot must fit Spark's int
    column, else ``ConfigError`` (the job's ``key_groups`` is too many)."""
    if partitions is None:
        return list(range(key_groups))
    slots = np.arange(key_groups, dtype=np.int64)
    turns = slots % partitions
    trying = np.flatnonzero(spark_hashes(slots) % partitions != turns)
    while trying.size:
        slots[trying] += key_groups
        if slots[trying].max() >= _INT_LIMIT:
            raise ConfigError(
                f"{key_groups} key groups over {partitions} partitions: a group's slot does not fit Spark's int "
                f"column; run the job with fewer key groups"
            )
        trying = trying[spark_hashes(slots[trying]) % partitions != turns[trying]]
    return slots.tolist()


def slot_group(slot: int, key_groups: int) -> int:
    """The key group of a slot."""
    return slot % key_groups
