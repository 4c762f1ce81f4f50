"""What a Python worker keeps between micro-batches: of each key group, the state it
handed Spark last and the checkpoint that state follows (``KeptCheckpoint``), per job
directory (``kept_checkpoint``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from persistent.runtime.group_state import CHECKPOINT, Base
from state.table import KeyedTable
from state.tables import Stored

__all__ = ["KeptCheckpoint", "kept_checkpoint"]


class KeptCheckpoint:
    """The state of one key group this process handed Spark last (``KeyGroup.encode``),
    and the checkpoint it decoded last (``KeyGroup.decode``).

    A group's state in Spark follows its newest checkpoint, and each micro-batch would
    decode that state and checkpoint again. When Spark hands back the very bytes this
    process handed it, the table that encoded them serves instead (``continued``): it
    holds its rows as decoding them would, so every later result and checkpoint is the
    same byte for byte, whichever process serves the group.

    Else the checkpoint kept serves the next decoding in the same process only for the
    very checkpoint it was decoded from: the same time and CRC32 of its record (what
    ``JobDirectory.restore`` checks the file against), state and interval. Another one
    (a replayed micro-batch's, one written again by a rewind or a rescale, another
    job's) is read and replaces it; when that one's chain holds only changes after the
    kept one, those are read and rolled forward from it. The checkpoint a handed state
    follows is the handed table's rows before it (``KeyedTable.checkpointed_rows``),
    taken when first needed. A group goes on from a handed table in place
    (``KeyedTable.handover``), which the process then no longer keeps: a retry of the
    micro-batch decodes the state. So does a group whose state another process handed
    since: it rolls the handed table's checkpoint forward in place (else each column
    it rewrites would be copied). Else a group works on a copy of the checkpoint kept."""

    def __init__(self) -> None:
        self._identity: tuple | None = None
        self._table: KeyedTable | None = None
        #: The state handed last: its bytes, state, interval, table and checkpoint followed.
        self._handed: tuple | None = None

    def continued(self, data: bytes, spec, interval_ms: int) -> tuple[KeyedTable, Base | None] | None:
        """The table that encoded ``data`` and the checkpoint it follows, if ``data`` is
        the state of ``spec`` and ``interval_ms`` this process handed last. The table is
        the group's now, to go on from in place: this process no longer keeps it, nor
        the checkpoint it follows, unless taken already (a retry decodes the state)."""
        if self._handed is None or self._handed[:3] != (data, spec, interval_ms):
            return None
        *_, table, base = self._handed
        self._handed = None
        if self._table is None:
            self._identity = None
        return table, base

    def handed(self, data: bytes, spec, table: KeyedTable, base: Base | None) -> None:
        """Keeps ``table``, which ``data`` is the state of, following checkpoint ``base``
        (None: ``data`` is the whole table), if decoding ``data`` gives it as it is."""
        held = table.decodes_as_held(following=base is not None)
        if held and base is not None:
            self._identity, self._table = (*base, spec, table.interval_ms), None
        else:
            self._take_checkpoint()  # out of the table handed before, which goes
        self._handed = (data, spec, table.interval_ms, table.handover(), base) if held else None

    def table(self, spec, interval_ms: int, base: Base,
              read: Callable[[Base | None], Sequence[Stored]]) -> KeyedTable:
        """The checkpoint ``base`` of state ``spec``, decoded, for a group to go on from:
        a copy of the one kept, or the chain ``read(known)`` returns
        (``CheckpointStore.recover``), where ``known`` is the checkpoint kept, if it is
        of the same state and interval, rolled forward from it. The checkpoint the table
        handed last follows is rolled forward in place, and this process then keeps
        nothing of the group."""
        identity = (base.time_ms, base.crc, spec, interval_ms)
        same = self._identity is not None and self._identity[2:] == identity[2:]
        known = Base(*self._identity[:2]) if same else None
        if same and self._identity != identity and self._table is None:
            start = self._handed[3].checkpointed_rows(in_place=True)
            self._identity = self._handed = None
            return spec.restore(interval_ms, read(known), start, CHECKPOINT)
        self._take_checkpoint()
        if self._identity != identity:
            start = self._table if same else None
            if same:
                self._identity = None  # rolled forward in place: kept again only if that succeeds
            self._table, self._identity = spec.restore(interval_ms, read(known), start, CHECKPOINT), identity
        return self._table.copy()

    def _take_checkpoint(self) -> None:
        """Takes the checkpoint kept out of the table handed last, if not yet taken."""
        if self._identity is not None and self._table is None:
            self._table = self._handed[3].checkpointed_rows()


#: What this process keeps of each key group (``KeptCheckpoint``), per job directory and
#: key group, of the ``_KEPT_JOBS`` directories it served last.
_KEPT: dict[str, dict[int, KeptCheckpoint]] = {}
_KEPT_JOBS = 2


def kept_checkpoint(root: str, grp: int) -> KeptCheckpoint:
    """What this process keeps of key group ``grp`` in job directory ``root``.

    Spark hands a key group to any of its Python workers; one that served the group's
    last micro-batch goes on from the table it handed, and one that served an earlier
    one reads only the changes written since the checkpoint it keeps, if they change it."""
    groups = _KEPT.pop(root, None) or {}
    _KEPT[root] = groups  # the newest last
    while len(_KEPT) > _KEPT_JOBS:
        del _KEPT[next(iter(_KEPT))]
    return groups.setdefault(grp, KeptCheckpoint())
