"""The key groups' function's care of its Python worker (``persistent.runtime.stateful``)."""

from __future__ import annotations

import gc

import pandas as pd
import pytest
from test_keygroup import VectorizedCount

from persistent.core.badrecords import BAD_RECORD_COLUMN, BadRecords, LateRecords
from persistent.runtime import stateful
from persistent.runtime.reports import Reports
from persistent.runtime.stateful import group_function
from persistent.storage.filesystems import JobStorage
from persistent.storage.job_directory import Recovery, RecoveryPath
from state.checkpoint_store import decode_record
from state.errors import MissingCheckpointError


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


class GroupState:
    """What ``run_group`` uses of Spark's ``GroupState``: the state's one value, the
    watermark, the timeout."""

    def __init__(self, watermark_ms: int):
        self.value, self.watermark_ms, self.timeout_ms = None, watermark_ms, None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple:
        return (self.value,)

    def update(self, value: tuple) -> None:
        (self.value,) = value

    def getCurrentWatermarkMs(self) -> int:  # noqa: N802 (Spark's name)
        return self.watermark_ms - 1

    def setTimeoutTimestamp(self, ms: int) -> None:  # noqa: N802 (Spark's name)
        self.timeout_ms = ms


class Accumulator:
    """The job's accumulator of reports on one process: the reports by key group, the latest of each."""

    def __init__(self):
        self.value = Reports().zero({})

    def add(self, more: dict) -> None:
        self.value = Reports().addInPlace(self.value, more)


def rows(keys: list[str], timestamp_ms: int) -> pd.DataFrame:
    """Spark's rows of messages for a key group, as ``applyInPandasWithState`` hands them over."""
    return pd.DataFrame({"key": keys, "timestamp": [timestamp_ms] * len(keys), "value": [1] * len(keys),
                         BAD_RECORD_COLUMN: [None] * len(keys), "part": [0] * len(keys)})


def test_a_groups_state_in_spark_follows_the_checkpoint_it_wrote_and_decodes_from_it(tmp_path):
    storage = JobStorage(str(tmp_path / "job"))
    run_group = group_function(VectorizedCount(), 100, Recovery(RecoveryPath.FRESH, 0, 0, key_groups=1), True,
                               BadRecords.FAIL, LateRecords.DROP, True, storage, reports := Accumulator())
    state = GroupState(watermark_ms=0)
    list(run_group((0,), iter([rows([f"k{i}" for i in range(500)], 50)]), state))
    assert decode_record(state.value, "state")[0] == 0  # no checkpoint yet: the whole table

    state.watermark_ms = 120
    (out,) = run_group((0,), iter([rows(["k0", "new"], 150)]), state)
    written = storage.directory().store(0)
    assert written.times() == [100] and reports.value[0].checkpoint_ms == 100
    assert decode_record(state.value, "state")[0] == 100  # follows the checkpoint at 100
    assert reports.value[0].state_bytes == len(state.value) < reports.value[0].checkpoint_bytes / 10
    assert sorted(out["key"][0]) == ["k0", "new"]

    state.watermark_ms = 160
    (out,) = run_group((0,), iter([rows(["k0", "k1"], 170)]), state)
    assert dict(zip(out["key"][0], out["value"][0])) == {"k0": 3, "k1": 2}
    (tmp_path / "job" / "checkpoints" / "group-00000").joinpath(written.path(100).rsplit("/", 1)[1]).unlink()
    state.watermark_ms = 180
    with pytest.raises(MissingCheckpointError, match="no checkpoint at 100 ms") as raised:
        list(run_group((0,), iter([rows(["k2"], 190)]), state))
    assert "follows the checkpoint at 100 ms" in "\n".join(raised.value.__notes__)
