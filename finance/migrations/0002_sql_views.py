"""The three views of SPEC 13; on PostgreSQL also the roles, the scope binding and row-level security.

Needs on PostgreSQL a role that owns the database and has CREATEROLE (the
SQL of docs/deploying.md#the-database-role), or the two roles created
beforehand and named in FINANCE_SQL_READER_ROLE / FINANCE_SQL_VIEW_OWNER_ROLE,
with the migrating role able to grant them to itself. See docs/sql-tool.md,
"Privileges the migration needs".

Fixed in place once (issue 28), with the end state unchanged: PostgreSQL
lets a non-superuser hand a view to a new owner only when that owner may
CREATE in the view's schema, which PostgreSQL 15 no longer grants to
everyone on `public`. So the view owner role gets CREATE on the schema for
the `ALTER VIEW … OWNER TO` statements and loses it right after (unless it
had it before). A statement the server refuses ends the migration with one
line naming the statement, the role and the server's reason.
"""

import re

from django.conf import settings
from django.core.management.base import CommandError
from django.db import DatabaseError, migrations

from finance import view_sql  # frozen module: its SQL never changes in place

_HINT = "the database role needs what docs/deploying.md#the-database-role lists"


def _roles(connection) -> tuple[str, str]:
    return view_sql.role_names(
        connection.settings_dict["NAME"],
        getattr(settings, "FINANCE_SQL_READER_ROLE", ""),
        getattr(settings, "FINANCE_SQL_VIEW_OWNER_ROLE", ""),
    )


def _statement_in_brief(statement: str) -> str:
    """The statement on one short line: a role's creation as `CREATE ROLE "name"`, a view or function
    without its body."""
    created = re.search(r"CREATE ROLE (\"(?:[^\"]|\"\")+\")", statement)
    if statement.startswith("DO $$") and created:
        return f"CREATE ROLE {created.group(1)}"
    brief = " ".join(statement.split())
    for cut in (" AS ", " USING ("):
        if cut in brief and brief.startswith(("CREATE VIEW", "CREATE FUNCTION", "CREATE POLICY")):
            brief = brief.split(cut, 1)[0]
    return brief


def _run(cursor, statement: str, *, role: str) -> None:
    """Run one setup statement; a refusal becomes a one-line `CommandError` (migrate prints it alone)."""
    try:
        cursor.execute(statement)
    except DatabaseError as error:
        cause = error.__cause__ or error
        diag = getattr(cause, "diag", None)  # psycopg's: the server's own message, without its CONTEXT lines
        reason = " ".join((getattr(diag, "message_primary", None) or str(cause)).split()) or type(cause).__name__
        privilege = getattr(diag, "sqlstate", None) == "42501"  # insufficient_privilege
        raise CommandError(
            f"finance 0002_sql_views: {_statement_in_brief(statement)} failed as role {role!r}: {reason}"
            + (f" ({_HINT})" if privilege else "")
        ) from error


def create_views(apps, schema_editor) -> None:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT current_schema(), current_user")
            schema, role = cursor.fetchone()
            reader, owner = _roles(connection)
            schema_sql, owner_sql = view_sql.quote_ident(schema), view_sql.quote_ident(owner)
            lent = False  # CREATE on the schema, lent to the view owner for the ALTER VIEW … OWNER TO statements
            for statement in view_sql.postgres_setup_statements(schema=schema, reader=reader, view_owner=owner):
                if statement.startswith("ALTER VIEW ") and not lent:
                    cursor.execute("SELECT has_schema_privilege(%s, %s, 'CREATE')", [owner, schema])
                    if not cursor.fetchone()[0]:
                        _run(cursor, f"GRANT CREATE ON SCHEMA {schema_sql} TO {owner_sql}", role=role)
                        lent = True
                _run(cursor, statement, role=role)
            if lent:
                _run(cursor, f"REVOKE CREATE ON SCHEMA {schema_sql} FROM {owner_sql}", role=role)
        else:
            for name in view_sql.VIEW_NAMES:
                cursor.execute(f"CREATE VIEW {name} AS {view_sql.view_body(name)}")


def drop_views(apps, schema_editor) -> None:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            for statement in view_sql.postgres_teardown_statements(view_owner=_roles(connection)[1]):
                cursor.execute(statement)
        else:
            for name in reversed(view_sql.VIEW_NAMES):
                cursor.execute(f"DROP VIEW IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = (("finance", "0001_initial"),)

    operations = (migrations.RunPython(create_views, drop_views),)
