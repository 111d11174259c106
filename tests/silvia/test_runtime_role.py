"""The runtime role (issue 39; docs/deploying.md#the-runtime-role): `deploy/runtime-role.sql` gives the serving
processes DML and membership in the SQL tool's reader role, nothing else; without that membership the SQL tool's
refusal, a log line and `/readyz` name the real cause.

Like tests/deploy/test_database_role.py: a throwaway owner role and database (deploy/database-role.sql), migrated as the
owner with the real `manage.py migrate`, then the runtime role made by the documented file, run with `psql` as the
owner, and `manage.py shell` as the runtime role. `.ci/run` also runs the SQL tool's tests and a live turn as it.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from django.db import connection
from psycopg import sql

from finance.sql_postgres import READER_MISSING
from finance.view_sql import role_names
from tests.deploy.test_database_role import _database_connection, _manage, documented_role  # noqa: F401 (the fixture)
from tests.finance_data import MAYA_IDS, SAM_IDS
from tests.pg_admin import suite_url

ROOT = Path(__file__).resolve().parent.parent.parent
RUNTIME_SQL = ROOT / "deploy" / "runtime-role.sql"

postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="roles are PostgreSQL's")


def test_deploying_quotes_the_runtime_role_sql_verbatim():
    page = (ROOT / "docs" / "deploying.md").read_text(encoding="utf-8")
    section = page.split("## The runtime role\n", 1)[1].split("\n## ", 1)[0]
    quoted = re.search(r"```sql\n(.*?)```", section, re.S)
    assert quoted is not None and quoted.group(1) == RUNTIME_SQL.read_text(encoding="utf-8")


# As the runtime role: the demo data, the tool as maya and sam, a page's read of maya's accounts, then /readyz
# and a query's refusal as they stand.
AS_THE_RUNTIME_ROLE = """
import json
from django.conf import settings
from django.contrib.auth import get_user_model
from citations.tools import ToolError
from finance.demo import seed_demo_finance
from finance.selectors import portfolio_for_user
from finance.sql_tool import execute_sql_tool
from silvia.readiness import run_checks
users = get_user_model().objects
maya, sam = users.get_or_create(username="maya")[0], users.get_or_create(username="sam")[0]
seed_demo_finance(maya=maya, sam=sam)
result = {"accounts": len(portfolio_for_user(user=maya).accounts), "ids": {}, "refused": None}
try:
    for user in (maya, sam):
        rows = execute_sql_tool().run({"query": "SELECT source_account_id FROM account_details"}, user=user)["rows"]
        result["ids"][user.username] = sorted(row["source_account_id"] for row in rows)
except ToolError as error:
    result["refused"] = str(error)
result["readyz"] = run_checks(settings.READINESS_CHECKS)
print(json.dumps(result))
"""


@postgresql_only
def test_the_runtime_role_serves_and_a_missing_grant_is_named(documented_role):  # noqa: F811
    server, owner, database = documented_role
    runtime = f"{database}_rt"
    reader, _ = role_names(database)
    try:
        assert _manage("migrate", "--no-input", "-v", "0", url=suite_url(database, user=owner)).returncode == 0
        made = subprocess.run(
            ["psql", suite_url(database, user=owner), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", f"runtime={runtime}",
             "-v", f"reader={reader}", "-f", str(RUNTIME_SQL)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        attributes = server.execute(
            "SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolinherit FROM pg_roles WHERE rolname = %s",
            [runtime],
        ).fetchone()
        assert attributes == (False, False, False, False, True)
        with _database_connection(database) as inside:
            owned = inside.execute("SELECT count(*) FROM pg_class WHERE relowner = %s::regrole", [runtime]).fetchone()
            creates = inside.execute("SELECT has_schema_privilege(%s, 'public', 'CREATE')", [runtime]).fetchone()
            member = inside.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", [runtime, reader]).fetchone()
        assert (owned, creates, member) == ((0,), (False,), (True,))

        url = suite_url(database, user=runtime)
        served = _manage("shell", "-c", AS_THE_RUNTIME_ROLE, url=url)
        assert served.returncode == 0, served.stderr
        result = json.loads(served.stdout.splitlines()[-1])
        assert result["ids"] == {"maya": sorted(MAYA_IDS), "sam": sorted(SAM_IDS)}
        assert result["accounts"] == len(MAYA_IDS) and result["refused"] is None
        assert result["readyz"]["sql_tool"] == "ok"
        cannot = _manage("shell", "-c", "from django.db import connection; connection.cursor().execute("
                         "'CREATE TABLE x (i int)')", url=url)  # fmt: skip
        assert cannot.returncode != 0 and "permission denied for schema public" in cannot.stderr

        # The failure: a DML-only role that is not in the reader role.
        with _database_connection(database) as inside:
            inside.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(reader), sql.Identifier(runtime)))
        refused = _manage("shell", "-c", AS_THE_RUNTIME_ROLE, url=url)
        assert refused.returncode == 0, refused.stderr
        result = json.loads(refused.stdout.splitlines()[-1])
        assert result["refused"] == READER_MISSING
        assert result["readyz"] == {"database": "ok", "job_engine": "ok", "sql_tool": "unavailable"}
        cause = f"the database role '{runtime}' is not a member of '{reader}'"
        lines = [line for line in refused.stderr.splitlines() if cause in line]
        assert len(lines) == 2 and "ERROR finance.sql_postgres: execute_sql refused every query" in lines[0]
        assert "account_details" not in refused.stderr  # never the query
    finally:
        server.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
        server.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(runtime)))
