"""State declarations: what a task's state is, as small frozen specs.

A task returns one of these from ``persistent_state()``; it names the monoid, and the
window (``WindowState``) or the time to live (``NonWindowState``). A spec holds no
state. The runtime builds the live state of many keys from a spec plus an optional
snapshot (``build``, after Bytewax's ``build(resume_state)``): a ``KeyedTable`` (a
``SessionTable`` for sessions), which updates, checkpoints at event-time boundaries
(``state.boundaries``), closes windows and recovers.

Specs are values: equal when their fields are, picklable, never changed after
construction, and checked when made (``StateValueError``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from monoids.base import Monoid
from state.errors import StateValueError
from state.expiry import check_ttl_ms
from state.table import KeyedTable
from state.tables import Stored, chain_table, decode_table, table_for
from state.window import SessionWindow, Window

__all__ = ["PersistentState", "NonWindowState", "WindowState"]

V = TypeVar("V")


class PersistentState(Generic[V]):
    """The declaration of a monoid state, kept for many keys by the runtime; its kinds
    are ``NonWindowState`` and ``WindowState``."""

    monoid: Monoid[V]
    #: The windows results are emitted for; ``None``: one running value per key.
    window: Window | SessionWindow | None = None
    #: A key whose newest message is more than this many ms behind the watermark
    #: expires; ``None``: never (only a ``NonWindowState`` takes one).
    ttl_ms: int | None = None

    def _check_monoid(self) -> None:
        if not isinstance(self.monoid, Monoid):
            raise StateValueError(f"a persistent state needs a Monoid, got {self.monoid!r}")

    def new_table(self, interval_ms: int, floor_ms: int = 0) -> KeyedTable:
        """An empty table for this state, checkpointed every ``interval_ms``, that holds
        nothing before ``floor_ms`` (a restore point: its last checkpoint)."""
        table = table_for(self.monoid, interval_ms, self.window, self.ttl_ms)
        table.checkpoint_ms = table.emitted_ms = floor_ms
        return table

    def build(self, interval_ms: int, resume_state: bytes | None = None, checkpoint_ms: int | None = None,
              what: str = "state") -> KeyedTable:
        """The live state of many keys: an empty table without ``resume_state``;
        else the table of those bytes (``KeyedTable.encode`` or ``checkpoint``), which
        must be the checkpoint at ``checkpoint_ms`` when that is given.

        Bytes of another monoid, window, interval or ``ttl_ms``, or damaged ones, raise
        ``CorruptCheckpointError`` (or ``StateValueError``) naming ``what``.
        """
        if resume_state is None:
            return self.new_table(interval_ms, checkpoint_ms or 0)
        if checkpoint_ms is not None:
            table = self.new_table(interval_ms)
            table.recover(checkpoint_ms, resume_state)
            return table
        return decode_table(resume_state, self.monoid, interval_ms, self.window, what, ttl_ms=self.ttl_ms)

    def restore(self, interval_ms: int, chain: Sequence[Stored], start: KeyedTable | None = None,
                what: str = "checkpoint") -> KeyedTable:
        """The live state of the checkpoint a chain ends with (``CheckpointStore.recover``):
        from its whole checkpoint, or ``start``, the decoded checkpoint its first changes
        change, rolled forward in place (``state.tables.chain_table``). Raises as
        ``build`` does, naming ``what`` and the checkpoint's time."""
        tables = [self.build(interval_ms, stored.data, what=f"{what} at {stored.time_ms} ms") for stored in chain]
        return chain_table(chain, tables, start)

    def follow(self, checkpoint: KeyedTable, interval_ms: int, since: bytes, what: str = "state") -> KeyedTable:
        """The live state: ``checkpoint`` (decoded by ``build`` or ``restore``), followed
        in place by the rows after it (``KeyedTable.encode_since_checkpoint`` bytes);
        ``CorruptCheckpointError`` (or ``StateValueError``) naming ``what`` when the rows
        are damaged, of another monoid, window, interval or ``ttl_ms``, or when they do
        not follow the checkpoint."""
        checkpoint.follow(self.build(interval_ms, since, what=what))
        return checkpoint


@dataclass(frozen=True)
class NonWindowState(PersistentState[V]):
    """One running monoid value per key; results are the new totals of the keys a
    micro-batch touched.

    With ``ttl_ms`` (a positive int) a key expires once its newest message is more than
    ``ttl_ms`` of event time behind the watermark: its key group drops it (all its
    values, also from later checkpoints), emits nothing for it, and a later message
    for it starts from ``zero()``, as for a new key (``KeyedTable.expire``).
    """

    monoid: Monoid[V]
    ttl_ms: int | None = None

    def __post_init__(self) -> None:
        self._check_monoid()
        if self.ttl_ms is not None:
            check_ttl_ms(self.ttl_ms, f"NonWindowState({self.monoid!r})")


@dataclass(frozen=True)
class WindowState(PersistentState[V]):
    """Aggregates per key and window: tumbling or sliding (``Window``), or sessions
    (``SessionWindow``).

    Messages are folded into panes (see ``state.window``) or session segments (see
    ``state.sessions``); a window is emitted once, when the watermark closes it, as the
    merge of its panes or segments (no ``Group`` needed), and what no window can need
    again is pruned at each checkpoint. A windowed state takes no ``ttl_ms``: its
    windows close instead.
    """

    monoid: Monoid[V]
    window: Window | SessionWindow

    def __post_init__(self) -> None:
        self._check_monoid()
        if not isinstance(self.window, (Window, SessionWindow)):
            raise StateValueError(f"WindowState needs a Window or a SessionWindow, got {self.window!r}")
