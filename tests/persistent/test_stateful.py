"""The key groups' function's care of its Python worker (``persistent.runtime.stateful``)."""

from __future__ import annotations

import gc

import pytest

from persistent.runtime import stateful


@pytest.fixture
def unfrozen():
    """A process whose objects the collector sees, as a fresh Python worker's; as it was after."""
    gc.unfreeze()
    stateful._FROZEN.clear()
    yield
    gc.unfreeze()
    stateful._FROZEN.clear()


def seen_by_the_collector(obj) -> bool:
    return any(tracked is obj for tracked in gc.get_objects())


def test_a_worker_freezes_what_it_holds_once_so_the_collections_after_its_tasks_skip_it(unfrozen):
    held = [[n] for n in range(1000)]
    assert seen_by_the_collector(held[0])
    stateful._freeze_the_libraries()
    frozen = gc.get_freeze_count()
    assert frozen >= len(held)
    assert not seen_by_the_collector(held[0])

    later = [[n] for n in range(1000)]
    stateful._freeze_the_libraries()
    assert gc.get_freeze_count() == frozen
    assert seen_by_the_collector(later[0])
