"""`ENGINE = "silvia.postgresql"`: Django's PostgreSQL backend whose pool checks a connection by a socket poll,
and whose dates are parsed by psycopg's compiled loader.

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

Django reads `timestamptz` values with a subclass of psycopg's pure-Python
loader (`psycopg_any.BaseTzLoader`: parse, then set the connection's time
zone), which cannot subclass the compiled one: about 6 µs a value, a tenth
of a 100-turn detail's time in Python (bench/README.md, "detail GET").
`TzLoader` does the same with the compiled parser (psycopg's default loader,
C with `psycopg[binary]`), and is that parser itself when its answer already
carries Django's zone (a UTC connection, as Django configures it).
"""

from __future__ import annotations

import datetime as dt
import functools
import select
from typing import Any

from django.conf import settings
from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base
from django.db.backends.postgresql.psycopg_any import get_adapters_template
from psycopg import adapt, adapters
from psycopg.pq import Format
from psycopg_pool import ConnectionPool

from silvia.startup import probe_database

__all__ = ["DatabaseWrapper", "TzLoader", "check_pooled_connection"]

_TIMESTAMPTZ_OID = adapters.types["timestamptz"].oid
#: psycopg's own text loader for timestamptz: compiled with psycopg[binary] or psycopg[c].
_PARSER: Any = adapters.get_loader(_TIMESTAMPTZ_OID, Format.TEXT)
_PROBE = b"2000-01-01 00:00:00+00"
#: The aliases whose database answered this process's probe (`DatabaseWrapper.get_new_connection`).
_POOLS_REACHED: set[str] = set()


class TzLoader(adapt.Loader):
    """Django's `BaseTzLoader` (a `timestamptz` in the connection's zone, then given `timezone` as is),
    parsed by `_PARSER`. Subclassed per zone by `_adapters`, as Django's `register_tzloader` does."""

    timezone: dt.tzinfo | None = None

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        parse = _PARSER(oid, context).load
        # The parser gives every value the zone it read from the connection: when that is
        # `timezone` already, setting it again changes nothing, so the parser is the loader.
        self._parse = parse
        if parse(_PROBE).tzinfo is self.timezone:
            self.load = parse  # type: ignore[method-assign]

    def load(self, data: Any) -> dt.datetime:
        return self._parse(data).replace(tzinfo=self.timezone)


@functools.lru_cache
def _adapters(use_tz: bool, timezone: dt.tzinfo | None) -> adapt.AdaptersMap:
    """Django's adapters (`get_adapters_template`) with `TzLoader` for `timestamptz`."""
    context = adapt.AdaptersMap(get_adapters_template(use_tz, timezone))
    context.register_loader(_TIMESTAMPTZ_OID, type("SpecificTzLoader", (TzLoader,), {"timezone": timezone}))
    return context


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
    """Django 5.2's PostgreSQL `DatabaseWrapper`; its pool (`OPTIONS["pool"]`) checks with `check_pooled_connection`,
    and its connections load `timestamptz` with `TzLoader`."""

    def get_connection_params(self) -> dict[str, Any]:
        params = super().get_connection_params()
        params["context"] = _adapters(settings.USE_TZ, self.timezone)
        return params

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        """Django's; before the pool's first connection in this process, one plain connection: a database
        that is missing or refuses is named in one line within 2 s (`DatabaseUnavailable`), where the pool
        would retry for `DATABASE_POOL_TIMEOUT`, warning at each try (docs/deploying.md#start-up-errors)."""
        if self.alias not in _POOLS_REACHED and self.settings_dict["OPTIONS"].get("pool"):
            probe_database(conn_params, self.settings_dict)
            _POOLS_REACHED.add(self.alias)
        return super().get_new_connection(conn_params)

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
