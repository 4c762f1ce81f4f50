"""Keys that expire: a table without a window may forget a key whose messages stopped
(``ttl_ms``, a time to live).

Such a table keeps the newest message time of each row (``KeyedTable.times``). A
message more than ``ttl_ms`` after its key's previous one starts the key from
``zero()`` (``restarts``), however the messages are batched;
``KeyedTable.expire(watermark_ms)`` drops every key whose newest message is more than
``ttl_ms`` behind the watermark, so expiry only drops keys that any message still
accepted would start from zero.
"""

from __future__ import annotations

import numpy as np

from state.errors import StateValueError

__all__ = ["check_ttl_ms", "restarts"]


def check_ttl_ms(ttl_ms: object, where: str) -> int:
    """``ttl_ms`` if it is a positive int of milliseconds, else ``StateValueError`` naming ``where``."""
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms <= 0:
        raise StateValueError(f"{where}: ttl_ms must be an int of milliseconds > 0, got {ttl_ms!r}")
    return ttl_ms


def restarts(
    codes: np.ndarray, table_times: np.ndarray, timestamps_ms: np.ndarray, ttl_ms: int
) -> tuple[np.ndarray | None, np.ndarray]:
    """Which keys messages restart: a table's rows (their newest message times
    ``table_times``) and a batch of messages (at ``timestamps_ms``, int64), ``codes``
    numbering the keys of both, the table's rows first, by first appearance.
    A message restarts its key when it is more than ``ttl_ms`` after the key's previous
    message, in time order (the key's newest time in the table for its oldest message of
    the batch); how the messages are cut into batches cannot change that.

    Returns the table's rows to keep, those of the keys no message restarts (None: all
    of them), and which messages to apply: those from their key's last restart on."""
    n_keys = int(codes.max(initial=-1)) + 1
    table_codes, codes = codes[:len(table_times)], codes[len(table_times):]
    newest = np.full(n_keys, -1, dtype=np.int64)  # -1: not in the table
    np.maximum.at(newest, table_codes, table_times)
    order = np.lexsort((timestamps_ms, codes))
    codes, times = codes[order], timestamps_ms[order]
    previous = np.empty_like(times)
    previous[1:] = times[:-1]
    oldest_of_key = np.ones(len(codes), dtype=bool)
    oldest_of_key[1:] = codes[1:] != codes[:-1]
    previous[oldest_of_key] = newest[codes[oldest_of_key]]
    restarting = (previous >= 0) & (times - previous > ttl_ms)
    last_restart = np.full(n_keys, -1)
    np.maximum.at(last_restart, codes[restarting], np.flatnonzero(restarting))
    if not restarting.any():
        return None, np.ones(len(timestamps_ms), dtype=bool)
    fresh = np.empty(len(timestamps_ms), dtype=bool)
    fresh[order] = np.arange(len(codes)) >= last_restart[codes]
    return last_restart[table_codes] < 0, fresh
