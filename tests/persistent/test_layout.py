"""Key groups spread evenly over Spark's state partitions (``persistent.runtime.layout``)."""

from __future__ import annotations

from collections import Counter

import pytest

from persistent.core.errors import ConfigError
from persistent.runtime import layout
from persistent.runtime.layout import group_slots, slot_group, spark_hashes

# Spark's ``hash()`` of these values of an ``int`` column.
SPARK_HASHES = {0: 933211791, 1: -559580957, 2: 1765031574, 7: 1079293707, 42: 29417773, -1: -1604776387,
                -42: 1758484645, 2**31 - 1: 133916647, -(2**31): 723455942, 123456789: -598405280}


def test_the_hash_is_sparks():
    assert spark_hashes(list(SPARK_HASHES)).tolist() == list(SPARK_HASHES.values())


def spark_hash(value: int) -> int:
    return int(spark_hashes([value])[0])


def test_grouped_by_their_numbers_the_groups_spread_unevenly():
    """What the slots mend: Spark's partition of groups 0..7 on 2 partitions."""
    assert Counter(spark_hash(group) % 2 for group in range(8)) == {1: 5, 0: 3}


@pytest.mark.parametrize(("key_groups", "partitions"), [(8, 2), (16, 4), (7, 3), (64, 16), (5, 5), (1, 1), (3, 1)])
def test_each_group_takes_the_partition_of_its_turn(key_groups, partitions):
    slots = group_slots(key_groups, partitions)
    assert [slot_group(slot, key_groups) for slot in slots] == list(range(key_groups))
    assert [spark_hash(slot) % partitions for slot in slots] == [g % partitions for g in range(key_groups)]
    # The first such slot: no smaller one of the group lands there.
    assert all(spark_hash(smaller) % partitions != g % partitions
               for g, slot in enumerate(slots) for smaller in range(g, slot, key_groups))
    loads = Counter(spark_hash(slot) % partitions for slot in slots)
    assert max(loads.values()) - min(loads.values()) <= 1 and len(loads) == min(partitions, key_groups)


def test_thousands_of_groups_get_their_slots_at_once():
    slots = group_slots(4096, 1024)
    assert (spark_hashes(slots) % 1024).tolist() == [g % 1024 for g in range(4096)]


def test_a_slot_beyond_spark_s_int_is_a_config_error_of_the_key_groups(monkeypatch):
    monkeypatch.setattr(layout, "_INT_LIMIT", 20)  # Spark's int, as small as 8 groups on 4 partitions reach
    with pytest.raises(ConfigError, match="8 key groups over 4 partitions: a group's slot does not fit"):
        group_slots(8, 4)


def test_without_partitions_a_group_is_keyed_by_its_number():
    assert group_slots(8, None) == list(range(8))
    assert [slot_group(g, 8) for g in range(8)] == list(range(8))
