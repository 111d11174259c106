"""The admin's support filter walks an index in the list's order (issue 35, SPEC 15).

`?support=<choice>` asks whether `inline_citations` holds an entry of that status, by a jsonpath
(`chat.citation_queries.HasSupportStatus`). Asked as `@?` of the GIN index of migration 0003, PostgreSQL has
no estimate of how many rows hold a status (a jsonb column this wide keeps no statistics), guesses few, reads
every match through the bitmap and sorts them: at 1,000,000 rows with a third of them flagged, 17 s for the
first page (bench/admin.py). The filter now asks `jsonb_path_exists(inline_citations, <path>, '{}', true)`
(the same test, `chat.citation_queries.postgresql_support_prefilter`).
A partial index per choice the GIN answers, on the list's order (`created_at DESC, id DESC`) and holding
only the rows of that choice, gives the first page by reading 100 entries of it, whatever the share.
`unchecked` is a negation that no index answers (as `untyped`): it keeps the exact test alone.

PostgreSQL only, built `CONCURRENTLY` (this migration is not atomic): writes go on while a big table's
indexes are built. On a big live table they can be made first with the same statements; `IF NOT EXISTS`
then skips them here.

Frozen history: the jsonpaths below are carried as text, not imported from app code
(`tests/chat/test_citation_queries.py` holds them equal to `jsonpath_support_any` of each choice, and the
predicate to the filter's SQL, which the planner needs word for word to know an index's rows are the
query's).
"""

from django.db import migrations

#: Each choice of the support filter the GIN answers, and its jsonpath (`jsonpath_support_any`).
SUPPORT_PATHS = {
    "flagged": '$[*] ? (@.support.status == "partly_supported" || @.support.status == "unsupported")',
    "supported": '$[*] ? (@.support.status == "supported")',
    "partly_supported": '$[*] ? (@.support.status == "partly_supported")',
    "unsupported": '$[*] ? (@.support.status == "unsupported")',
}


def index_name(choice: str) -> str:
    return f"ai_chat_logs_support_{choice}"


POSTGRESQL_INDEXES = tuple(
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index_name(choice)} ON ai_chat_logs "
    f"(created_at DESC, id DESC) WHERE jsonb_path_exists(inline_citations, '{path}'::jsonpath, '{{}}'::jsonb, true)"
    for choice, path in SUPPORT_PATHS.items()
)
POSTGRESQL_DROP = tuple(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(choice)}" for choice in SUPPORT_PATHS)


def create_postgresql_indexes(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in POSTGRESQL_INDEXES:
            schema_editor.execute(statement)


def drop_postgresql_indexes(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in POSTGRESQL_DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("chat", "0010_user_write_marks")]

    operations = [migrations.RunPython(create_postgresql_indexes, drop_postgresql_indexes, elidable=False)]
