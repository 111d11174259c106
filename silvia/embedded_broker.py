"""The embedded broker: kombu's SQLAlchemy transport, as shipped, on a SQLite file (docs/job-engine.md).

With no `CELERY_BROKER_URL`, settings point Celery at
`sqlite:///<CELERY_BROKER_DIR>/broker.sqlite3` through this `Transport`,
with SQLite's busy timeout at 30 s (`connect_args`, which the transport
hands to SQLAlchemy's `create_engine`). kombu's own channel does the
messaging: a put is one committed row, a get takes the oldest visible row
inside `BEGIN IMMEDIATE` (SQLite's write lock) and marks it taken, so each
message is handed over whole, exactly once (`tests/silvia/test_embedded_broker.py`
puts and gets many at once across processes). The subclass sets two things
through kombu's public API only:

- `polling_interval`, the documented "time to sleep between unsuccessful
  polls": 0.1 s instead of 1 s, so a turn starts within about 0.1 s. (The
  transport hands every transport option to `create_engine`, which refuses
  this one, so it cannot be an option.)
- `establish_connection`: a process's first connection to a file declares
  the turns' queue (`CELERY_TASK_DEFAULT_QUEUE`), which makes kombu's
  tables if missing, under an flock on `<file>.lock`, and gives its database
  connection back. kombu creates its two tables and a queue's row on first
  use, each by check-then-insert, and two processes starting on a fresh
  file (a web and a worker) could both find nothing and one fail on "table
  already exists" or a UNIQUE constraint.
"""

from __future__ import annotations

import fcntl
import threading
from typing import Any

from django.conf import settings
from kombu.transport import sqlalchemy

__all__ = ["Transport"]

# The broker files this process has prepared (their SQLAlchemy URLs), and the lock around that set.
_prepared: set[str] = set()
_preparing = threading.Lock()


class Transport(sqlalchemy.Transport):
    """kombu's SQLAlchemy transport polling every 0.1 s, its tables made under a lock. `client.hostname` is the
    SQLAlchemy URL `sqlite:///<absolute path>`."""

    polling_interval = 0.1

    def establish_connection(self) -> Any:
        connection = super().establish_connection()
        if self.client is None:  # kombu makes a transport for a Connection, which it holds here
            raise ValueError("silvia.embedded_broker.Transport is opened through a kombu Connection")
        url = str(self.client.hostname)
        with _preparing:
            if url not in _prepared:
                self._declare_under_file_lock(url)
                _prepared.add(url)
        return connection

    def _declare_under_file_lock(self, url: str) -> None:
        with open(f"{url.removeprefix('sqlite:///')}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            channel = self.create_channel(self)
            try:
                channel.queue_declare(queue=settings.CELERY_TASK_DEFAULT_QUEUE)  # tables and queue row, if missing
            finally:
                channel.session.close()  # its pooled database connection back (kombu's close keeps it)
                self.close_channel(channel)


def prune_taken_messages(*, batch_size: int) -> int:
    """Delete the messages workers have taken from the embedded broker's file; how many (SPEC 16).

    kombu's SQLAlchemy transport never deletes a message: a get marks it taken
    (`visible` false) and leaves the row, so the file grows by one row per turn
    for ever. A taken message is never read again (an acknowledgement touches
    no row; a worker that stops sends its unacknowledged ones again as new
    rows), so taken rows go, `batch_size` per statement, through the channel's
    own session and message model (kombu's public `Channel.session` and
    `Channel.message_cls`). One `DELETE` per batch: SQLite's write lock is held
    only for it, and a worker's poll waits at most that long.
    """
    from kombu import Connection
    from sqlalchemy import select

    total = 0
    with Connection(
        settings.CELERY_BROKER_URL, transport=Transport, transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS
    ) as broker:
        channel = broker.default_channel
        message, session = channel.message_cls, channel.session
        try:
            while True:
                taken = select(message.id).where(message.visible.is_(False)).order_by(message.id).limit(batch_size)
                deleted = (
                    session.query(message)
                    .filter(message.id.in_(taken.scalar_subquery()))
                    .delete(synchronize_session=False)
                )
                session.commit()
                total += deleted
                if deleted < batch_size:
                    return total
        finally:
            session.close()  # its pooled database connection back
