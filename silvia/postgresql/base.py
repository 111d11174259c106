"""`ENGINE = "silvia.postgresql"`: Django's PostgreSQL backend that names a database it cannot reach in one
line, at once (docs/deploying.md#start-up-errors).

Subclassed as Django's docs describe ("Subclassing the built-in database
backends"), for one method: before this process's first connection through
the pool, one plain connection with a 2 s timeout (`silvia.startup.probe_database`).
A database that is missing or refuses is then `DATABASE_URL
postgres://app@host:5432/nodb: database "nodb" does not exist`, where the
pool would retry for `DATABASE_POOL_TIMEOUT` (10 s), warning at each try,
and end with "couldn't get a connection". And one check: the pool's
connection a request takes is checked here (one empty query, as
psycopg-pool's `check_connection`), not by the pool (`CONN_HEALTH_CHECKS`
is off with the pool: silvia/settings.py). psycopg-pool waits 1 s, 2 s,
4 s, ... between two failed checks, so with every idle connection closed by
the server (a restart, a failover) a request waited past
`DATABASE_POOL_TIMEOUT`, a 503 with the database up. Here a failed check
has the pool check every idle connection at once (`ConnectionPool.check()`)
and takes another. Everything else is Django's pool.

The check costs a round trip per connection taken, and a live turn takes
one for each batch of its events (issue 36: about a tenth of the CPU of a
turn, the worker's and PostgreSQL's). So it is asked only when the server
spoke on the idle connection: a connection the server closes (a restart, a
failover, `pg_terminate_backend`) is sent its `FATAL` and its end, which make
the socket readable, where an idle connection in autocommit is sent nothing.
A non-blocking `poll` of the socket (`Connection.fileno()`) tells, for one
system call; a readable socket is checked as before. A server that vanished
without a word is found by neither (the check would wait for the network's
timeout): the request's own statement fails instead.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from django.db.backends.postgresql import base

from silvia.startup import probe_database

__all__ = ["DatabaseWrapper"]

#: The aliases whose database answered this process's probe.
_REACHED: set[str] = set()


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's PostgreSQL `DatabaseWrapper`, probing the database once before the pool's first connection and
    checking each connection taken from the pool."""

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        if self.alias not in _REACHED and self.settings_dict["OPTIONS"].get("pool"):
            probe_database(conn_params, self.settings_dict)
            _REACHED.add(self.alias)
        pool = self.pool  # None without one, and for Django's own connections to the `postgres` database
        conn = super().get_new_connection(conn_params)
        if pool is None:
            return conn
        try:
            return _checked(pool, conn)
        except psycopg.Error:
            pool.check()  # the server likely closed the idle ones too: drop them all now, not one per back-off
        return _checked(pool, super().get_new_connection(conn_params))


def _checked(pool: Any, conn: Any) -> Any:
    """`conn` if the server said nothing on it while it was idle (`_spoke`), or it answers one empty query
    (psycopg-pool's `check_connection`: pooled connections are in autocommit); else it goes back to the pool,
    which drops a closed one and opens another, and this raises."""
    if not _spoke(conn):
        return conn
    try:
        conn.execute("")
    except psycopg.Error:
        pool.putconn(conn)
        raise
    return conn


def _spoke(conn: Any) -> bool:
    """Whether anything arrived on an idle pooled connection's socket: the server's `FATAL` and its close
    (a terminated backend, a restart), or its reset. `poll` with no wait, not `select` (a stream process holds
    more than `select`'s 1,024 descriptors). True when the socket cannot be asked (a closed connection)."""
    try:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError, psycopg.Error):
        return True
