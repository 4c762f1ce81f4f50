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
records its generation's partitions (``persistent.storage.job_directory.Generation``),
and a generation recorded before slots existed groups by the group's number
(``partitions`` None).

Nothing here imports Spark; a Spark test checks ``spark_hash`` against Spark's own.
"""

from __future__ import annotations

__all__ = ["group_slots", "spark_hash", "slot_group"]

_SEED = 42
_MASK = 0xFFFFFFFF


def _rotate_left(x: int, bits: int) -> int:
    return ((x << bits) | (x >> (32 - bits))) & _MASK


def _mix(h1: int, value: int) -> int:
    k1 = _rotate_left(value * 0xCC9E2D51 & _MASK, 15) * 0x1B873593 & _MASK
    return (_rotate_left(h1 ^ k1, 13) * 5 + 0xE6546B64) & _MASK


def _finish(h1: int, length: int) -> int:
    h1 ^= length
    h1 = (h1 ^ (h1 >> 16)) * 0x85EBCA6B & _MASK
    h1 = (h1 ^ (h1 >> 13)) * 0xC2B2AE35 & _MASK
    return h1 ^ (h1 >> 16)


def spark_hash(value: int) -> int:
    """Spark's ``hash()`` of an ``int`` column's value (Murmur3 x86 32-bit, seed 42), as
    a signed 32-bit int: what its shuffle partitions rows by."""
    h1 = _finish(_mix(_SEED, value & _MASK), 4)
    return h1 - (1 << 32) if h1 >> 31 else h1


def group_slots(key_groups: int, partitions: int | None) -> list[int]:
    """The slot of each key group: the value Spark groups its rows by, so that group
    ``g`` lands in state partition ``g % partitions``. Without ``partitions`` (a Spark
    checkpoint written before slots), each group's slot is its number."""
    if partitions is None:
        return list(range(key_groups))
    slots = []
    for group in range(key_groups):
        slot = group
        while spark_hash(slot) % partitions != group % partitions:
            slot += key_groups
        slots.append(slot)
    return slots


def slot_group(slot: int, key_groups: int) -> int:
    """The key group of a slot."""
    return slot % key_groups
