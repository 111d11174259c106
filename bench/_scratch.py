"""Scratch PostgreSQL databases for the benchmarks, dropped with their roles.

Every database a benchmark creates is named `<prefix>_<kind>_<pid>_<n>`.
The prefix is `BENCH_DB_PREFIX` (default `silvia_bench`; `bench/run_all.py`
passes one per run, so it can sweep whatever a killed benchmark left).
Dropping a scratch database also drops the two roles the finance migration
created for it, with the project's own drop path
(`finance.sql_roles.drop_database_roles`, as `manage.py drop_sql_roles`):
roles are cluster-wide and outlive `DROP DATABASE`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator

import psycopg
from psycopg import sql

DEFAULT_PREFIX = "silvia_bench"
_numbers = itertools.count()


def prefix() -> str:
    """The name prefix of this process's scratch databases."""
    return os.environ.get("BENCH_DB_PREFIX") or DEFAULT_PREFIX


def scratch_name(kind: str) -> str:
    """A fresh database name: `<prefix>_<kind>_<pid>_<n>` (PostgreSQL keeps 63 bytes of a name)."""
    name = f"{prefix()}_{kind}_{os.getpid()}_{next(_numbers)}"
    if len(name) > 48:  # the role names add `_sql_reader` to the first 48 characters
        raise ValueError(f"scratch database name {name!r} is too long: shorten BENCH_DB_PREFIX")
    return name


def database_urls(server_url: str, name: str) -> tuple[str, str]:
    """(psycopg conninfo, Django DATABASE_URL) of database `name` on `server_url`."""
    conninfo = psycopg.conninfo.make_conninfo(server_url, dbname=name)
    params = psycopg.conninfo.conninfo_to_dict(conninfo)
    auth = str(params.get("user", "postgres")) + (f":{params['password']}" if params.get("password") else "")
    django_url = f"postgres://{auth}@{params.get('host', '127.0.0.1')}:{params.get('port', 5432)}/{name}"
    return conninfo, django_url


def create_database(server_url: str, name: str) -> None:
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_database(server_url: str, name: str) -> None:
    """Drop database `name` (closing its sessions) and the roles its migration created."""
    from finance.sql_roles import drop_database_roles

    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        drop_database_roles(admin, name)


def drop_database_roles(server_url: str, name: str) -> list[str]:
    """Drop the two roles the finance migration created for database `name`, once it is gone; returns them."""
    from finance.sql_roles import DatabaseStillExistsError
    from finance.sql_roles import drop_database_roles as drop_roles

    with psycopg.connect(server_url, autocommit=True) as admin:
        try:
            return drop_roles(admin, name).dropped
        except DatabaseStillExistsError:
            return []


@contextlib.contextmanager
def scratch_postgres(server_url: str, kind: str = "db") -> Iterator[tuple[str, str]]:
    """A fresh database on `server_url`, dropped with its roles at exit; yields (conninfo, Django DATABASE_URL)."""
    name = scratch_name(kind)
    create_database(server_url, name)
    try:
        yield database_urls(server_url, name)
    finally:
        drop_database(server_url, name)


def sweep(server_url: str, name_prefix: str) -> list[str]:
    """Drop every database starting with `name_prefix` and the roles named after one; returns what was dropped.

    For `run_all.py`, with the prefix it gave its benchmarks: what a killed
    benchmark could not drop itself.
    """
    from finance.sql_roles import drop_database_roles as drop_roles

    pattern = name_prefix.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%") + "%"
    dropped = []
    with psycopg.connect(server_url, autocommit=True) as admin:
        for (name,) in admin.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [pattern]).fetchall():
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            dropped.append(name)
        roles = admin.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE %s", [pattern]).fetchall()
        for base in sorted({role.removesuffix("_sql_reader").removesuffix("_sql_views") for (role,) in roles}):
            dropped += drop_roles(admin, base).dropped
    return dropped
