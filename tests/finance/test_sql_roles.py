"""The SQL tool's roles go with their database (issue 21, item 3; docs/sql-tool.md#the-roles).

PostgreSQL only. Each test makes its own scratch databases, named after the
test database (so never another engineer's), migrates one with the real
`manage.py migrate`, and checks `pg_roles` through `manage.py drop_sql_roles`.
The suite's own test database loses its roles when the session ends
(tests/conftest.py); `.ci/run` compares `pg_roles` before and after the run.
The scratch databases are made by `tests.pg_admin` and owned by the suite's
role, so under `.ci/run`'s least-privileged role they migrate and lose their
roles as that role.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection
from psycopg import sql

from finance.view_sql import role_names
from tests.pg_admin import admin_connection, suite_url

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="roles are PostgreSQL's")


def _manage(*args: str, database: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "silvia.settings", "DATABASE_URL": suite_url(database)}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def _roles_like(server, prefix: str) -> list[str]:
    pattern = prefix.replace("_", r"\_") + "%"
    rows = server.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE %s ORDER BY 1", [pattern])
    return [row[0] for row in rows]


@pytest.fixture
def scratch(db) -> Iterator[tuple[object, list[str]]]:
    """(an autocommit connection to the server, two database names of this test's own); both dropped after,
    with their roles."""
    base = connection.settings_dict["NAME"][:40]
    names = [f"{base}_roles_a", f"{base}_roles_b"]
    with admin_connection() as server:
        try:
            yield server, names
        finally:
            for name in names:
                server.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            for name in names:
                for role in role_names(name):
                    server.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def _create_database(server, name: str) -> None:
    """Database `name`, owned by the suite's role (which then migrates it)."""
    owner = connection.settings_dict["USER"] or "postgres"
    server.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(owner)))


def test_roles_are_dropped_with_their_database(scratch):
    server, (name, _) = scratch
    _create_database(server, name)
    migrated = _manage("migrate", "--no-input", "-v", "0", database=name)
    assert migrated.returncode == 0, migrated.stderr
    assert _roles_like(server, name) == [f"{name}_sql_reader", f"{name}_sql_views"]

    refused = _manage("drop_sql_roles", database=name)
    assert refused.returncode == 1
    assert f"database '{name}' still exists: its SQL roles are dropped after it" in refused.stderr
    assert _roles_like(server, name) == [f"{name}_sql_reader", f"{name}_sql_views"]

    server.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(name)))
    dropped = _manage("drop_sql_roles", database=name)
    assert dropped.returncode == 0, dropped.stderr
    assert dropped.stdout.splitlines() == [f"dropped role {name}_sql_reader", f"dropped role {name}_sql_views"]
    assert _roles_like(server, name) == []

    again = _manage("drop_sql_roles", database=name)
    assert again.returncode == 0
    assert again.stdout.splitlines() == [f"role {name}_sql_reader: not there", f"role {name}_sql_views: not there"]


def test_a_role_another_database_still_uses_is_left_alone(scratch):
    server, (name, other) = scratch
    _create_database(server, name)
    assert _manage("migrate", "--no-input", "-v", "0", database=name).returncode == 0
    reader = f"{name}_sql_reader"
    _create_database(server, other)
    server.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(other), sql.Identifier(reader)))
    server.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(name)))

    # --database-name: the command runs with the settings of another database (here the live `other`).
    partly = _manage("drop_sql_roles", "--database-name", name, database=other)
    assert partly.returncode == 1
    assert partly.stdout.splitlines() == [f"dropped role {name}_sql_views"]
    assert f"role {reader}: still used by another database, left alone" in partly.stderr
    assert _roles_like(server, name) == [reader]

    server.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(other)))
    assert _manage("drop_sql_roles", database=name).returncode == 0
    assert _roles_like(server, name) == []
