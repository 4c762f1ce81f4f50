"""What a Python worker keeps between micro-batches: the checkpoint of each key group
it decoded last (``KeptCheckpoint``), per job directory (``kept_checkpoint``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from persistent.runtime.group_state import CHECKPOINT, Base
from state.table import KeyedTable
from state.tables import Stored

__all__ = ["KeptCheckpoint", "kept_checkpoint"]


class KeptCheckpoint:
    """The checkpoint of one key group a process decoded last (``KeyGroup.decode``).

    A group's state in Spark follows its newest checkpoint (``KeyGroup.encode``), and
    each micro-batch would read and decode that checkpoint again. Kept, it serves the
    next decoding in the same process only for the very checkpoint it was decoded
    from: the same time and CRC32 of its record (what ``JobDirectory.restore`` checks
    the file against), state and interval. Another one (a replayed micro-batch's,
    one written again by a rewind or a rescale, another job's) is read and replaces
    it; when that one's chain holds only changes after the kept one, those are read
    and rolled forward from it. The table kept is never changed: a decoded group
    works on a copy (``PersistentState.follow``)."""

    def __init__(self) -> None:
        self._identity: tuple | None = None
        self._table: KeyedTable | None = None

    def table(self, spec, interval_ms: int, base: Base,
              read: Callable[[Base | None], Sequence[Stored]]) -> KeyedTable:
        """The checkpoint ``base`` of state ``spec``, decoded: the one kept, or the chain
        ``read(known)`` returns (``CheckpointStore.recover``), where ``known`` is the
        checkpoint kept, if it is of the same state and interval."""
        identity = (base.time_ms, base.crc, spec, interval_ms)
        if self._identity != identity:
            start = self._table if self._identity is not None and self._identity[2:] == identity[2:] else None
            known = Base(*self._identity[:2]) if start is not None else None
            self._table, self._identity = spec.restore(interval_ms, read(known), start, CHECKPOINT), identity
        return self._table


#: The checkpoints this process decoded (``KeptCheckpoint``), per job directory and key
#: group, of the ``_KEPT_JOBS`` directories it served last.
_KEPT: dict[str, dict[int, KeptCheckpoint]] = {}
_KEPT_JOBS = 2


def kept_checkpoint(root: str, grp: int) -> KeptCheckpoint:
    """What this process keeps of key group ``grp``'s checkpoint in job directory ``root``.

    Spark hands a key group to any of its Python workers; one that served the group's
    last micro-batch decodes its state without reading the checkpoint again."""
    groups = _KEPT.pop(root, None) or {}
    _KEPT[root] = groups  # the newest last
    while len(_KEPT) > _KEPT_JOBS:
        del _KEPT[next(iter(_KEPT))]
    return groups.setdefault(grp, KeptCheckpoint())
