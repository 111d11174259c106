"""The three views of SPEC 13; on PostgreSQL also the roles, the scope binding and row-level security.

Needs on PostgreSQL: CREATEROLE (or the two roles created beforehand and
named in FINANCE_SQL_READER_ROLE / FINANCE_SQL_VIEW_OWNER_ROLE, with the
migrating role able to grant them to itself). See docs/sql-tool.md, "Privileges the migration needs".
"""

from django.conf import settings
from django.db import migrations

from finance import view_sql  # frozen module: its SQL never changes in place


def _roles(connection) -> tuple[str, str]:
    return view_sql.role_names(
        connection.settings_dict["NAME"],
        getattr(settings, "FINANCE_SQL_READER_ROLE", ""),
        getattr(settings, "FINANCE_SQL_VIEW_OWNER_ROLE", ""),
    )


def create_views(apps, schema_editor) -> None:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT current_schema()")
            (schema,) = cursor.fetchone()
            reader, owner = _roles(connection)
            for statement in view_sql.postgres_setup_statements(schema=schema, reader=reader, view_owner=owner):
                cursor.execute(statement)
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
