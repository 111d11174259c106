"""`ENGINE = "silvia.postgresql"`: Django's PostgreSQL backend that names a database it cannot reach in one
line, at once (docs/deploying.md#start-up-errors).

Subclassed as Django's docs describe ("Subclassing the built-in database
backends"), for one method: before this process's first connection through
the pool, one plain connection with a 2 s timeout (`silvia.startup.probe_database`).
A database that is missing or refuses is then `DATABASE_URL
postgres://app@host:5432/nodb: database "nodb" does not exist`, where the
pool would retry for `DATABASE_POOL_TIMEOUT` (10 s), warning at each try,
and end with "couldn't get a connection". Everything else is Django's: its
pool, with its own check (`CONN_HEALTH_CHECKS`).
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base

from silvia.startup import probe_database

__all__ = ["DatabaseWrapper"]

#: The aliases whose database answered this process's probe.
_REACHED: set[str] = set()


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's PostgreSQL `DatabaseWrapper`, probing the database once before the pool's first connection."""

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        if self.alias not in _REACHED and self.settings_dict["OPTIONS"].get("pool"):
            probe_database(conn_params, self.settings_dict)
            _REACHED.add(self.alias)
        return super().get_new_connection(conn_params)
