"""The documented database role is enough, and a missing privilege says which statement needed it (issue 28, item 1).

docs/deploying.md#the-database-role quotes `deploy/database-role.sql`; these
tests run that file with `psql` (as `tests.pg_admin`'s admin) to make a
throwaway role and database of this test database's name, migrate the
database as that role with the real `manage.py migrate`, and use the SQL
tool under it. Everything made is dropped after, the tool's two roles too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection
from psycopg import sql

from finance.sql_roles import drop_database_roles
from finance.view_sql import role_names
from tests.finance_data import MAYA_IDS, SAM_IDS
from tests.pg_admin import admin_connection, admin_url, suite_url

ROOT = Path(__file__).resolve().parents[2]
ROLE_SQL = ROOT / "deploy" / "database-role.sql"

postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="roles are PostgreSQL's")


def test_deploying_quotes_the_role_sql_verbatim():
    page = (ROOT / "docs" / "deploying.md").read_text(encoding="utf-8")
    section = page.split("## The database role\n", 1)[1].split("\n## ", 1)[0]
    quoted = re.search(r"```sql\n(.*?)```", section, re.S)
    assert quoted is not None and quoted.group(1) == ROLE_SQL.read_text(encoding="utf-8")


def _manage(*args: str, url: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "silvia.settings", "DATABASE_URL": url, **(env or {})}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def documented_role(db) -> Iterator[tuple[object, str, str]]:
    """(an admin connection, a role and a database made by `deploy/database-role.sql`); all dropped after."""
    base = connection.settings_dict["NAME"][:40]
    role, database = f"{base}_lp_app", f"{base}_lp"
    variables = ["-v", "ON_ERROR_STOP=1", "-v", f"role={role}", "-v", f"database={database}"]
    made = subprocess.run(
        ["psql", admin_url(), "-X", "-q", *variables, "-f", str(ROLE_SQL)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    with admin_connection() as server:
        try:
            assert made.returncode == 0, made.stderr
            yield server, role, database
        finally:
            server.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
            drop_database_roles(server, database)
            server.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


# Run as the role: maya's and sam's demo data, then the tool as each of them and one query it must refuse.
USE_THE_TOOL = """
import json
from django.contrib.auth import get_user_model
from finance.demo import seed_demo_finance
from finance.sql_tool import execute_sql_tool
from citations.tools import ToolError
users = get_user_model().objects
maya, sam = users.create(username="maya"), users.create(username="sam")
seed_demo_finance(maya=maya, sam=sam)
tool = execute_sql_tool()
ids = {}
for user in (maya, sam):
    rows = tool.run({"query": "SELECT source_account_id FROM account_details"}, user=user)["rows"]
    ids[user.username] = sorted(row["source_account_id"] for row in rows)
try:
    tool.run({"query": "SELECT * FROM finance_account"}, user=maya)
    refused = None
except ToolError as error:
    refused = str(error)
print(json.dumps({"ids": ids, "refused": refused}))
"""


@postgresql_only
def test_the_documented_role_migrates_a_fresh_database_and_the_sql_tool_keeps_each_user_to_their_rows(
    documented_role,
):
    server, role, database = documented_role
    attributes = server.execute(
        "SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = %s",
        [role],
    ).fetchone()
    assert attributes == (False, True, False, False, True)  # exactly the documented privileges

    url = suite_url(database, user=role)
    migrated = _manage("migrate", "--no-input", "-v", "0", url=url)
    assert migrated.returncode == 0, migrated.stderr
    reader, views = role_names(database)
    owners = server.execute(
        "SELECT datname, pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", [database]
    ).fetchone()
    assert owners == (database, role)

    used = _manage("shell", "-c", USE_THE_TOOL, url=url)
    assert used.returncode == 0, used.stderr
    result = json.loads(used.stdout.splitlines()[-1])
    assert result["ids"] == {"maya": sorted(MAYA_IDS), "sam": sorted(SAM_IDS)}
    assert result["refused"] is not None and "finance_account" in result["refused"]

    # The view owner was lent CREATE on the schema to take the views, and no longer has it.
    with _database_connection(database) as inside:
        lent = inside.execute("SELECT has_schema_privilege(%s, 'public', 'CREATE')", [views]).fetchone()
        owned = inside.execute("SELECT DISTINCT viewowner FROM pg_views WHERE schemaname = 'public'").fetchall()
    assert lent == (False,)
    assert owned == [(views,)]
    assert server.execute("SELECT count(*) FROM pg_roles WHERE rolname IN (%s, %s)", [reader, views]).fetchone() == (2,)


def _database_connection(database: str):
    import psycopg

    return psycopg.connect(admin_url().rsplit("/", 1)[0] + f"/{database}", autocommit=True)


@postgresql_only
@pytest.mark.parametrize("missing", ["CREATEROLE", "ownership of the public schema"])
def test_a_missing_privilege_stops_migrate_with_one_line_naming_the_statement(documented_role, missing):
    server, role, database = documented_role
    reader, views = role_names(database)
    if missing == "CREATEROLE":
        server.execute(sql.SQL("ALTER ROLE {} NOCREATEROLE").format(sql.Identifier(role)))
        statement, reason = f'CREATE ROLE "{reader}"', "permission denied to create role"
    else:
        # `public` someone else's, the role only allowed to create in it: the failure, as reported.
        with _database_connection(database) as inside:
            inside.execute("ALTER SCHEMA public OWNER TO CURRENT_USER")
            inside.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(role)))
        statement, reason = f'ALTER VIEW account_details OWNER TO "{views}"', "permission denied for schema public"

    migrated = _manage("migrate", "--no-input", "-v", "0", url=suite_url(database, user=role))

    assert migrated.returncode == 1
    assert migrated.stderr.splitlines() == [
        f"CommandError: finance 0002_sql_views: {statement} failed as role {role!r}: {reason} "
        "(the database role needs what docs/deploying.md#the-database-role lists)"
    ]
    # One transaction: nothing of the migration stays, not even its roles.
    assert server.execute("SELECT count(*) FROM pg_roles WHERE rolname IN (%s, %s)", [reader, views]).fetchone() == (0,)
