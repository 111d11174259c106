"""Django expressions asking a row's citation JSON itself.

Issue 12; docs/targets.md#wire-format and docs/turns.md#what-a-turn-stores.

Every admin count, filter and search reads `citations`/`inline_citations` as
stored, whoever wrote the row (the service, the backfill, the ORM, raw SQL),
so nothing can go stale. Each expression is written twice, per vendor:

- PostgreSQL: a prefilter the indexes of migration 0003 answer (jsonb `@?`
  with a constant jsonpath over GIN `jsonb_path_ops`; pg_trgm over the
  lowered sources, `SOURCES_TEXT_SQL`), then the exact test entry by entry
  (`jsonb_array_elements`), since lax jsonpath unwraps nested arrays;
- SQLite: JSON1 `json_each`/`json_type`/`json_extract` (no index: SQLite is
  the development database).

States are those of `citations.summary.classify_citation`: a target kind,
`typed`, `untyped` or `malformed`; support statuses those of
`citations.support.support_status` (SPEC 15, over `inline_citations` only).
Other databases raise `NotSupportedError`.

These are ORM expressions (`Func` subclasses used in `filter`/`annotate`);
the SQL inside them is raw because the ORM has no jsonpath, `@?` or
`jsonb_array_elements`/`json_each` lookup. What they cost is measured by
bench/README.md, "admin" (each filter's line names the expression it uses).
"""

# SQL below is built from constant fragments and compiled column names only;
# every value (a term, an id, a jsonpath) travels as a parameter.
# ruff: noqa: S608
from __future__ import annotations

import json
from typing import Any

from django.db import NotSupportedError
from django.db.models import BooleanField, F, Func, IntegerField, JSONField

from chat.citation_sql import (
    jsonpath_account_entry,
    jsonpath_any,
    jsonpath_entry,
    jsonpath_support_any,
    postgresql_entry_sql,
    postgresql_malformed_sql,
    postgresql_support_in,
    postgresql_support_statuses,
    sqlite_account_id,
    sqlite_entry,
    sqlite_support_in,
    sqlite_support_statuses,
)
from citations.summary import MALFORMED, UNTYPED
from citations.support import PARTLY_SUPPORTED, SUPPORT_STATUSES, UNCHECKED, UNSUPPORTED
from citations.targets import TARGET_KINDS

__all__ = [
    "FLAGGED",
    "SOURCES_TEXT_SQL",
    "STATES",
    "SUPPORT_CHOICES",
    "CitationCount",
    "HasCitationState",
    "HasSupportStatus",
    "NamesAccount",
    "SourceContains",
    "SupportCounts",
]

#: Every state a filter may ask for.
STATES: tuple[str, ...] = (*TARGET_KINDS, UNTYPED, MALFORMED)
JSON_COLUMNS = ("citations", "inline_citations")

#: The lowered JSON text of both columns' sources. Migration 0003 indexes this
#: exact expression with pg_trgm (it carries its own copy; a test keeps them
#: equal), so `SourceContains` must spell it the same way.
SOURCES_TEXT_SQL = (
    "lower((jsonb_path_query_array({citations}, '$[*].source')::text"
    " || jsonb_path_query_array({inline_citations}, '$[*].source')::text))"
)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class _JsonFunc(Func):
    """A Func over JSON columns, spelled per vendor (`as_postgresql`/`as_sqlite`)."""

    def __init__(self, *columns: str) -> None:
        super().__init__(*(F(column) for column in columns))

    def _columns(self, compiler: Any, connection: Any) -> tuple[list[str], list[Any]]:
        sqls, params = [], []
        for expression in self.get_source_expressions():
            sql, column_params = compiler.compile(expression)
            sqls.append(sql)
            params.extend(column_params)
        return sqls, params

    # Dispatched per vendor (as_postgresql/as_sqlite); narrower than Func.as_sql's
    # function/template/arg_joiner parameters, which this expression never takes.
    def as_sql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:  # type: ignore[override]
        raise NotSupportedError(f"{type(self).__name__} runs on PostgreSQL and SQLite only, not {connection.vendor}")


class HasCitationState(_JsonFunc):
    """True when `citations` or `inline_citations` holds an entry in `state` (one of `STATES`).

    Raises `ValueError` for another state.
    """

    output_field = BooleanField()

    def __init__(self, state: str) -> None:
        if state not in STATES:
            raise ValueError(f"unknown citation state {state!r}")
        super().__init__(*JSON_COLUMNS)
        self.state = state

    def as_postgresql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        columns, _ = self._columns(compiler, connection)
        if self.state == MALFORMED:
            entry_sql, entry_path = postgresql_malformed_sql("e")
        else:
            entry_sql, entry_path = postgresql_entry_sql("e", jsonpath_entry(self.state))
        # Untyped and malformed are negations no index answers: exact test only.
        indexed = self.state not in (UNTYPED, MALFORMED)
        arms, params = [], []
        for column in columns:
            exact = f"EXISTS (SELECT 1 FROM jsonb_array_elements({column}) AS e WHERE {entry_sql})"
            if indexed:
                arms.append(f"({column} @? %s::jsonpath AND {exact})")
                params += [jsonpath_any(self.state), entry_path]
            else:
                arms.append(exact)
                params.append(entry_path)
        return "(" + " OR ".join(arms) + ")", params

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        columns, params = self._columns(compiler, connection)
        condition = sqlite_entry(self.state)
        arms = []
        for c in columns:
            exact = f"EXISTS (SELECT 1 FROM json_each({c}) AS e WHERE {condition})"
            if self.state in TARGET_KINDS:
                # A kind is a JSON string, so `"account"` (quotes included) is
                # in the text of any row holding one, unless it is spelled
                # with escapes: those rows go on to the exact test.
                arms.append(f"((instr({c}, '\"{self.state}\"') > 0 OR instr({c}, '\\') > 0) AND {exact})")
            else:
                arms.append(exact)
        return "(" + " OR ".join(arms) + ")", params


class NamesAccount(_JsonFunc):
    """True when a readable `account`/`accounts` target in either column names `account_id` exactly (case-sensitive)."""

    output_field = BooleanField()

    def __init__(self, account_id: str) -> None:
        super().__init__(*JSON_COLUMNS)
        self.account_id = account_id

    def as_postgresql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        columns, _ = self._columns(compiler, connection)
        entry_filter = jsonpath_account_entry(self.account_id)
        entry_sql, entry_path = postgresql_entry_sql("e", entry_filter)
        arms = [
            f"({c} @? %s::jsonpath AND EXISTS (SELECT 1 FROM jsonb_array_elements({c}) AS e WHERE {entry_sql}))"
            for c in columns
        ]
        return "(" + " OR ".join(arms) + ")", [f"$[*] ? ({entry_filter})", entry_path] * len(columns)

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        columns, _ = self._columns(compiler, connection)
        condition = sqlite_account_id()
        literal = _plain_ascii(self.account_id)
        arms, params = [], []
        for c in columns:
            exact = f"EXISTS (SELECT 1 FROM json_each({c}) AS e WHERE {condition})"
            if literal:
                # A plain ASCII id is spelled as is in stored JSON text
                # without escapes: a cheap substring test skips the rows that
                # cannot hold it (rows with an escape go to the exact test).
                arms.append(f"((instr({c}, %s) > 0 OR instr({c}, '\\') > 0) AND {exact})")
                params += [self.account_id, self.account_id, self.account_id]
            else:
                arms.append(exact)
                params += [self.account_id, self.account_id]
        return "(" + " OR ".join(arms) + ")", params


def _plain_ascii(text: str) -> bool:
    """Printable ASCII without `"` or `\\`: written unescaped in any JSON text."""
    return text != "" and all(" " <= ch <= "~" and ch not in '"\\' for ch in text)


class SourceContains(_JsonFunc):
    """True when an entry's string `source`, in either column, contains `term` ignoring case (non-ASCII too).

    Case is folded by the database's `lower()` on PostgreSQL (its ctype must
    be a UTF-8 locale, e.g. C.UTF-8, not "C") and by Python's `str.lower` on
    SQLite (`silvia_lower`, registered by `chat.apps`).
    """

    output_field = BooleanField()

    def __init__(self, term: str) -> None:
        super().__init__(*JSON_COLUMNS)
        self.term = term

    def as_postgresql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        citations, inline = self._columns(compiler, connection)[0]
        # The trigram index answers the LIKE over the sources' JSON text (the
        # term JSON-escaped the same way); the EXISTS then checks each
        # source on its own, so a match across two sources never counts.
        escaped = _like_escape(json.dumps(self.term, ensure_ascii=False)[1:-1])
        prefilter = (
            SOURCES_TEXT_SQL.format(citations=citations, inline_citations=inline) + " LIKE '%%' || lower(%s) || '%%'"
        )
        exact = " OR ".join(
            f"EXISTS (SELECT 1 FROM jsonb_array_elements({c}) AS e"
            " WHERE jsonb_typeof(e -> 'source') = 'string' AND strpos(lower(e ->> 'source'), lower(%s)) > 0)"
            for c in (citations, inline)
        )
        return f"({prefilter} AND ({exact}))", [escaped, self.term, self.term]

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        columns, _ = self._columns(compiler, connection)
        condition = (
            "CASE WHEN e.type = 'object' THEN (json_type(e.value, '$.source') = 'text'"
            " AND instr(silvia_lower(json_extract(e.value, '$.source')), silvia_lower(%s)) > 0) ELSE 0 END"
        )
        plain = _plain_ascii(self.term)
        arms, params = [], []
        for c in columns:
            exact = f"EXISTS (SELECT 1 FROM json_each({c}) AS e WHERE {condition})"
            if plain:
                # Prefilter on the raw JSON text, without a Python call per
                # entry: a plain ASCII term appears, ASCII case aside, in the
                # text of any row whose all-ASCII source holds it; a row with
                # a non-ASCII character or any JSON escape (`\\u00f4`, `\\/`)
                # goes on to the exact test, since its text may differ.
                non_ascii = f"length({c}) <> length(CAST({c} AS BLOB))"
                prefilter = f"(instr(lower({c}), lower(%s)) > 0 OR instr({c}, '\\') > 0 OR {non_ascii})"
                arms.append(f"({prefilter} AND {exact})")
                params += [self.term, self.term]
            else:
                arms.append(exact)
                params.append(self.term)
        return "(" + " OR ".join(arms) + ")", params


class CitationCount(_JsonFunc):
    """The number of entries of one JSON array column: all, or those in `state` (`typed`, `untyped`, `malformed`)."""

    output_field = IntegerField()

    def __init__(self, column: str, state: str | None = None) -> None:
        if state not in (None, "typed", UNTYPED, MALFORMED):
            raise ValueError(f"unknown count {state!r}")
        super().__init__(column)
        self.state = state

    def as_postgresql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        (column,), params = self._columns(compiler, connection)
        if self.state is None:
            return f"jsonb_array_length({column})", params
        if self.state == MALFORMED:
            entry_sql, entry_path = postgresql_malformed_sql("e")
        else:
            entry_sql, entry_path = postgresql_entry_sql("e", jsonpath_entry(self.state))
        return f"(SELECT count(*) FROM jsonb_array_elements({column}) AS e WHERE {entry_sql})", [*params, entry_path]

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        (column,), params = self._columns(compiler, connection)
        if self.state is None:
            return f"json_array_length({column})", params
        return f"(SELECT count(*) FROM json_each({column}) AS e WHERE {sqlite_entry(self.state)})", params


#: The support filter's choices: each status, and `flagged` (partly supported or unsupported), the question a
#: supervisor asks first (docs/admin.md#the-log-list).
FLAGGED = "flagged"
SUPPORT_CHOICES: dict[str, tuple[str, ...]] = {
    FLAGGED: (PARTLY_SUPPORTED, UNSUPPORTED),
    **{status: (status,) for status in SUPPORT_STATUSES},
}


class HasSupportStatus(_JsonFunc):
    """True when `inline_citations` holds an entry whose support status (`support_status`) is one of those of
    `choice` (a key of `SUPPORT_CHOICES`). Raises `ValueError` for another choice.

    PostgreSQL: `inline_citations @? <jsonpath>` answered by the GIN index of migration 0003
    (`ai_chat_logs_inline_gin`), then the exact status per entry; `unchecked` (a missing or malformed
    support too) is a negation no index answers: exact test only, as `untyped` is.
    """

    output_field = BooleanField()

    def __init__(self, choice: str) -> None:
        if choice not in SUPPORT_CHOICES:
            raise ValueError(f"unknown support choice {choice!r}")
        super().__init__("inline_citations")
        self.statuses = SUPPORT_CHOICES[choice]

    def _unchecked(self, statuses_sql: str) -> tuple[str, list[str]]:
        placeholders = ", ".join(["%s"] * len(self.statuses))
        exact = f"EXISTS (SELECT 1 FROM ({statuses_sql}) AS supports WHERE status IN ({placeholders}))"
        return exact, list(self.statuses)

    def as_postgresql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        (column,), _ = self._columns(compiler, connection)
        if UNCHECKED in self.statuses:
            return self._unchecked(postgresql_support_statuses(column))
        exact = postgresql_support_in(column, len(self.statuses))
        return f"({column} @? %s::jsonpath AND {exact})", [jsonpath_support_any(self.statuses), *self.statuses]

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        (column,), _ = self._columns(compiler, connection)
        if UNCHECKED in self.statuses:
            return self._unchecked(sqlite_support_statuses(column))
        exact = sqlite_support_in(column, len(self.statuses))
        # A status is a JSON string: `"unsupported"` (quotes included) is in the text of any row holding one,
        # unless spelled with escapes: those rows go on to the exact test.
        quoted = " OR ".join(f"instr({column}, '\"{status}\"') > 0" for status in self.statuses)
        return f"(({quoted} OR instr({column}, '\\') > 0) AND {exact})", list(self.statuses)


class SupportCounts(_JsonFunc):
    """`{status: count}` over the entries of `inline_citations`, for every support status (`support_status`),
    in one pass: a JSON object (`JSONField`), its counts adding up to the number of entries."""

    output_field = JSONField()

    def __init__(self) -> None:
        super().__init__("inline_citations")

    def as_postgresql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        (column,), params = self._columns(compiler, connection)
        pairs = _pairs("count(*) FILTER (WHERE status = '{status}')")
        return f"(SELECT jsonb_build_object({pairs}) FROM ({postgresql_support_statuses(column)}) AS s)", params

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        (column,), params = self._columns(compiler, connection)
        pairs = _pairs("coalesce(sum(status = '{status}'), 0)")
        return f"(SELECT json_object({pairs}) FROM ({sqlite_support_statuses(column)}))", params


def _pairs(count: str) -> str:
    """`'status', <count of it>` for each support status: a JSON object constructor's arguments."""
    return ", ".join(f"'{status}', {count.format(status=status)}" for status in SUPPORT_STATUSES)
