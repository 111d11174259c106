"""`ENGINE = "silvia.postgresql"`: Django's PostgreSQL backend whose pool checks a connection by a socket poll.

With `CONN_HEALTH_CHECKS`, Django gives its psycopg-pool pool the pool's own
check (`ConnectionPool.check_connection`), an empty query every time a
request takes a connection: one round trip on every request, whatever the
request does (bench/README.md, "empty list": about a fifth of an empty list
under load). A connection the server closed or terminated has something to
read (the server's `FATAL` message, or the end of the stream), so a poll of
the socket, which costs no round trip, tells it from a healthy idle one.
Only a connection with something waiting gets the real check; one that fails
it is discarded and the pool hands out another, so a connection the server
closed is still replaced, not reported as an error
(docs/deploying.md#database-connections).
"""

from __future__ import annotations

import select
from typing import Any

from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

__all__ = ["DatabaseWrapper", "check_pooled_connection"]


def check_pooled_connection(connection: Any) -> None:
    """psycopg-pool's `check` callback: return quietly for a usable connection, raise for a broken one.

    Raises (`psycopg.OperationalError` from the real check, or
    `ConnectionError` for a closed one) when the connection is unusable.
    """
    if connection.closed:
        raise ConnectionError("the pooled connection is closed")
    poller = select.poll()
    poller.register(connection.fileno(), select.POLLIN | select.POLLPRI)
    if poller.poll(0):
        # Something is waiting (a FATAL message, the end of the stream, a
        # notification): let a query decide.
        ConnectionPool.check_connection(connection)


class DatabaseWrapper(base.DatabaseWrapper):
    """Django 5.2's PostgreSQL `DatabaseWrapper`; its pool (`OPTIONS["pool"]`) checks with `check_pooled_connection`."""

    @property
    def pool(self) -> ConnectionPool | None:
        pool_options = self.settings_dict["OPTIONS"].get("pool")
        pools = self._connection_pools  # type: ignore[attr-defined]  # Django's, not in the stubs
        if pool_options and self.alias != NO_DB_ALIAS and self.alias not in pools:
            # As Django's own `pool` property, with our check in place of
            # `ConnectionPool.check_connection` (Django passes `check` itself,
            # so it cannot come through OPTIONS).
            connect_kwargs = self.get_connection_params()
            connect_kwargs["autocommit"] = True
            pool = ConnectionPool(
                kwargs=connect_kwargs,
                open=False,
                configure=self._configure_connection,  # type: ignore[attr-defined]
                check=check_pooled_connection,
                **({} if pool_options is True else pool_options),
            )
            pools.setdefault(self.alias, pool)
        return super().pool
