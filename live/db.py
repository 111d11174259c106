"""What differs between PostgreSQL and SQLite for live turns: the write lock (docs/live.md)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from django.db import connection

__all__ = ["sqlite_write_lock"]

_sqlite_lock = threading.RLock()


@contextlib.contextmanager
def sqlite_write_lock() -> Iterator[None]:
    """On SQLite, one writer at a time within this process.

    SQLite has one write lock per database; threads that wait for it in
    SQLite's busy handler sleep in growing steps (up to 100 ms), which would
    stall every stream. A Python lock hands it over at once. Every write
    transaction of live turns takes it *before* `BEGIN` (it is reentrant),
    so no thread waits for it while holding SQLite's lock. PostgreSQL locks
    rows, so nothing is held there.
    """
    if connection.vendor != "sqlite":
        yield
        return
    with _sqlite_lock:
        yield
