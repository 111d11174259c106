"""Connections to the PostgreSQL server made beside Django's own: psycopg's arguments from the settings.

The SQL tool's role maintenance (`finance.sql_roles`), the stream process's
async LISTEN (`live.wakeups`) and the start-up probe (`silvia.startup`) open
their own psycopg connections to the database Django uses. Their arguments
come from the documented `DATABASES` keys (NAME, USER, PASSWORD, HOST, PORT,
OPTIONS), not from the backend's undocumented `get_connection_params()`.
`finance` is the lowest app that connects to PostgreSQL itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

__all__ = ["libpq_params", "maintenance_connection"]

#: OPTIONS that Django's PostgreSQL backend reads itself; libpq knows none of them.
DJANGO_ONLY_OPTIONS = frozenset({"pool", "isolation_level", "server_side_binding", "assume_role", "cursor_factory"})


def libpq_params(settings_dict: Mapping[str, Any]) -> dict[str, Any]:
    """psycopg's keyword arguments (libpq's) for the database of `settings_dict` (a `DATABASES` entry, or
    `connection.settings_dict`, whose NAME is the test database's under the tests): dbname, user, password,
    host and port when set, UTF-8, then OPTIONS but the Django-only ones."""
    params: dict[str, Any] = {
        "client_encoding": "UTF8",  # as Django's backend connects: NOTIFY payloads and text are UTF-8
        "dbname": settings_dict.get("NAME") or "postgres",
        "user": settings_dict.get("USER"),
        "password": settings_dict.get("PASSWORD"),
        "host": settings_dict.get("HOST"),
        "port": settings_dict.get("PORT"),
    }
    params = {key: value for key, value in params.items() if value not in (None, "")}
    options = settings_dict.get("OPTIONS") or {}
    params.update({key: value for key, value in options.items() if key not in DJANGO_ONLY_OPTIONS})
    return params


def maintenance_connection(connection_params: Mapping[str, Any], dbname: str = "postgres") -> psycopg.Connection[Any]:
    """An autocommit connection to `dbname` on the server of `connection_params` (`libpq_params(...)`)."""
    return psycopg.connect(**{**connection_params, "dbname": dbname}, autocommit=True)
