"""The SQL tool's two PostgreSQL roles belong to one database; they go when it goes (docs/sql-tool.md#the-roles).

Migration 0002 creates `<database>_sql_reader` and `<database>_sql_views`
(`finance.view_sql.role_names`). Roles are cluster-wide, so `DROP DATABASE`
leaves them behind; `drop_database_roles` drops them after the database is
gone. It is safe by construction:

- it refuses while the database exists (its views and grants still use the
  roles);
- it only ever names the two roles derived from that database's name, never
  roles set in `FINANCE_SQL_READER_ROLE` / `FINANCE_SQL_VIEW_OWNER_ROLE`
  (those are the operator's);
- PostgreSQL itself refuses to drop a role that owns, or holds a privilege
  on, anything in any database of the cluster: such a role is reported as
  in use and left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import errors, sql

from finance.view_sql import role_names

__all__ = ["DatabaseStillExistsError", "RolesDropped", "drop_database_roles"]


class DatabaseStillExistsError(Exception):
    """The database is still there: its roles are dropped after it."""


@dataclass(slots=True)
class RolesDropped:
    """What `drop_database_roles` did, role by role."""

    dropped: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    #: Roles PostgreSQL refused to drop: something in some database still depends on them.
    in_use: list[str] = field(default_factory=list)


def drop_database_roles(server: psycopg.Connection[Any], database_name: str) -> RolesDropped:
    """Drop the SQL tool's roles of `database_name`, which must no longer exist.

    `server` is an autocommit connection to another database of the same
    cluster (`finance.libpq.maintenance_connection`). Raises `DatabaseStillExistsError`
    while the database exists; a role that is absent, or that PostgreSQL
    refuses to drop because something still uses it, is reported, not raised.
    Needs `CREATEROLE` (or a superuser) for the drop itself.
    """
    found = server.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database_name]).fetchone()
    if found:
        raise DatabaseStillExistsError(
            f"database {database_name!r} still exists: its SQL roles are dropped after it (DROP DATABASE first)"
        )
    report = RolesDropped()
    for role in role_names(database_name):
        if not server.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
            report.absent.append(role)
            continue
        try:
            server.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        except errors.DependentObjectsStillExist:
            report.in_use.append(role)
        else:
            report.dropped.append(role)
    return report
