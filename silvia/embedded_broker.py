"""The embedded broker: kombu's SQLAlchemy transport, as shipped, on a SQLite file (docs/job-engine.md).

With no `CELERY_BROKER_URL`, settings point Celery at
`sqlite:///<CELERY_BROKER_DIR>/broker.sqlite3` through this `Transport`,
with SQLite's busy timeout at 30 s (`connect_args`, which the transport
hands to SQLAlchemy's `create_engine`). kombu's own channel does the
messaging: a put is one committed row, a get takes the oldest visible row
inside `BEGIN IMMEDIATE` (SQLite's write lock) and marks it taken, so each
message is handed over whole, exactly once (`tests/test_embedded_broker.py`
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
