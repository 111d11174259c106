"""A PostgreSQL connection that may create databases and roles, for the tests that make scratch ones.

The suite's own role by default. When the suite runs as the least-privileged
role of docs/deploying.md#the-database-role (as `.ci/run` does), that role
cannot create a database or a login role: `SILVIA_TEST_PG_ADMIN_URL` then
names a superuser on the same server (a loopback address), and the scratch
databases are still given to the suite's role, so what they run, they run as it.
"""

from __future__ import annotations

import os
from typing import Any

import psycopg
from django.db import connection

from finance.libpq import libpq_params, maintenance_connection

__all__ = ["admin_connection", "admin_url", "suite_url"]

ADMIN_URL_VARIABLE = "SILVIA_TEST_PG_ADMIN_URL"


def suite_url(database: str, user: str | None = None) -> str:
    """`postgres://user@host:port/database` on the suite's server (the suite's user by default)."""
    settings = connection.settings_dict
    host, port = settings["HOST"] or "127.0.0.1", settings["PORT"] or 5432
    return f"postgres://{user or settings['USER'] or 'postgres'}@{host}:{port}/{database}"


def admin_url() -> str:
    """The admin's URL: `SILVIA_TEST_PG_ADMIN_URL`, else the suite's role on the `postgres` database."""
    return os.environ.get(ADMIN_URL_VARIABLE) or suite_url("postgres")


def admin_connection() -> psycopg.Connection[Any]:
    """An autocommit connection as the admin, to the server's `postgres` database."""
    if os.environ.get(ADMIN_URL_VARIABLE):
        return psycopg.connect(os.environ[ADMIN_URL_VARIABLE], autocommit=True)
    return maintenance_connection(libpq_params(connection.settings_dict))
