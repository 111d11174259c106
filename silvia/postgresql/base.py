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
"""

from __future__ import annotations

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
    """`conn` if it answers one empty query (psycopg-pool's `check_connection`: pooled connections are in
    autocommit); else it goes back to the pool, which drops a closed one and opens another, and this raises."""
    try:
        conn.execute("")
    except psycopg.Error:
        pool.putconn(conn)
        raise
    return conn
