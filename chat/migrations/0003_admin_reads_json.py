"""The admin reads the citation JSON itself (issue 12).

1. Refuse to go on, listing the offending rows by id, when a JSON column of
   `ai_chat_logs` is not an array (the constraints below would fail blind).
2. Drop the summary columns (`citation_count`, ..., `sources`): counts,
   filters and search are computed from the JSON (`chat.citation_queries`),
   so no writer can leave them stale.
3. Check constraints: both JSON columns are arrays, on both databases.
4. PostgreSQL only: GIN `jsonb_path_ops` indexes on both columns (the kind
   filter and the account-id search) and a pg_trgm index on the lowered
   sources (the source search). On a big live table, create them first with
   `CREATE INDEX CONCURRENTLY IF NOT EXISTS` (same names and definitions):
   this migration then skips them.

Frozen history: the SQL below is carried here, not imported from app code
(`tests/chat/test_admin_queries.py` checks that the trigram expression still
matches `chat.citation_queries.SOURCES_TEXT_SQL`).
"""

import uuid

from django.db import migrations, models

import chat.json_array_check

OFFENDERS_SHOWN = 50

NOT_ARRAY_SQL = {
    "postgresql": (
        "SELECT id, jsonb_typeof(citations), jsonb_typeof(inline_citations) FROM ai_chat_logs "
        "WHERE jsonb_typeof(citations) <> 'array' OR jsonb_typeof(inline_citations) <> 'array' ORDER BY id"
    ),
    "sqlite": (
        "SELECT id, t1, t2 FROM (SELECT id, "
        "CASE WHEN json_valid(citations) THEN json_type(citations) ELSE 'not JSON' END AS t1, "
        "CASE WHEN json_valid(inline_citations) THEN json_type(inline_citations) ELSE 'not JSON' END AS t2 "
        "FROM ai_chat_logs) WHERE t1 IS NOT 'array' OR t2 IS NOT 'array' ORDER BY id"
    ),
}

JSON_TYPE_NAMES = {"text": "string", "integer": "number", "real": "number", "true": "boolean", "false": "boolean"}

SOURCES_TEXT = (
    "lower((jsonb_path_query_array(citations, '$[*].source')::text"
    " || jsonb_path_query_array(inline_citations, '$[*].source')::text))"
)
POSTGRESQL_INDEXES = (
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE INDEX IF NOT EXISTS ai_chat_logs_citations_gin ON ai_chat_logs USING gin (citations jsonb_path_ops)",
    "CREATE INDEX IF NOT EXISTS ai_chat_logs_inline_gin ON ai_chat_logs USING gin (inline_citations jsonb_path_ops)",
    f"CREATE INDEX IF NOT EXISTS ai_chat_logs_sources_trgm ON ai_chat_logs USING gin ({SOURCES_TEXT} gin_trgm_ops)",
)
POSTGRESQL_DROP = (
    "DROP INDEX IF EXISTS ai_chat_logs_sources_trgm",
    "DROP INDEX IF EXISTS ai_chat_logs_inline_gin",
    "DROP INDEX IF EXISTS ai_chat_logs_citations_gin",
)


class NotArrayRows(Exception):
    """Rows whose JSON columns are not arrays: the constraints cannot be added until they are fixed."""


def refuse_rows_that_are_not_arrays(apps, schema_editor):
    connection = schema_editor.connection
    sql = NOT_ARRAY_SQL.get(connection.vendor)
    if sql is None:
        raise NotArrayRows(f"migration chat.0003 supports PostgreSQL and SQLite, not {connection.vendor}")
    with connection.cursor() as cursor:
        cursor.execute(sql)
        rows = cursor.fetchall()
    if not rows:
        return
    lines = []
    for row_id, citations_type, inline_type in rows[:OFFENDERS_SHOWN]:
        # One spelling on both databases: dashed ids (SQLite stores 32 hex
        # digits) and jsonb's type names (SQLite says "text", "integer", ...).
        wrong = [
            f"{name} is {JSON_TYPE_NAMES.get(kind, kind)}"
            for name, kind in (("citations", citations_type), ("inline_citations", inline_type))
            if kind != "array"
        ]
        lines.append(f"  {uuid.UUID(str(row_id))}: {', '.join(wrong)}")
    more = f"\n  ... and {len(rows) - OFFENDERS_SHOWN} more" if len(rows) > OFFENDERS_SHOWN else ""
    raise NotArrayRows(
        f"ai_chat_logs: {len(rows)} row(s) hold a citation column that is not a JSON array "
        f"(a string is usually double-encoded JSON). Fix or delete them, then migrate again:\n"
        + "\n".join(lines)
        + more
    )


def create_postgresql_indexes(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in POSTGRESQL_INDEXES:
            schema_editor.execute(statement)


def drop_postgresql_indexes(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in POSTGRESQL_DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("chat", "0002_backfill_citation_targets")]

    operations = [
        migrations.RunPython(refuse_rows_that_are_not_arrays, migrations.RunPython.noop),
        *(
            migrations.RemoveField(model_name="chatlog", name=name)
            for name in (
                "citation_count",
                "typed_count",
                "untyped_count",
                "malformed_count",
                "target_kinds",
                "account_ids",
                "sources",
            )
        ),
        migrations.AddConstraint(
            model_name="chatlog",
            constraint=models.CheckConstraint(
                condition=chat.json_array_check.JsonTypeIsArray("citations"), name="ai_chat_logs_citations_is_array"
            ),
        ),
        migrations.AddConstraint(
            model_name="chatlog",
            constraint=models.CheckConstraint(
                condition=chat.json_array_check.JsonTypeIsArray("inline_citations"),
                name="ai_chat_logs_inline_citations_is_array",
            ),
        ),
        migrations.RunPython(create_postgresql_indexes, drop_postgresql_indexes),
    ]
