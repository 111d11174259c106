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

One table of rules (`_RULES`, docs/targets.md#wire-format, the same as
`parse_citation_target`) gives both spellings: a PostgreSQL jsonpath in lax
mode, with a `.type()` guard at every level so that lax mode never unwraps
an array nor compares across types (a GIN `jsonb_path_ops` index answers
`@?` with these paths), and a SQLite JSON1 condition over one `json_each`
element, whose `{v}` is the entry's JSON text (`json_each.value`, only ever
read when `json_each.type` is 'object'; comparisons use the null-safe `IS`).
Tests tie both to `classify_citation` and `support_status` over random rows.

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

from citations.summary import MALFORMED, UNTYPED
from citations.support import PARTLY_SUPPORTED, SUPPORT_STATUSES, UNCHECKED, UNSUPPORTED
from citations.targets import (
    LIBRARY_KINDS,
    TARGET_KINDS,
    AccountsTarget,
    AccountTarget,
    AnalysisTarget,
    MarketDataTarget,
    PortfolioTarget,
    WebTarget,
)

# --- the rules as SQL, one spelling per database (the expressions below wrap them) --------------------

#: The kinds whose target holds nothing but its kind.
_KIND_ONLY = (AnalysisTarget.kind, PortfolioTarget.kind)


def _jp_nonempty(path: str) -> str:
    return f'({path}.type() == "string" && {path} != "")'


def _jp_kind_fields(kind: str, t: str) -> str:
    """What a target `t` of `kind` must hold besides its kind (jsonpath)."""
    if kind in _KIND_ONLY:
        return ""
    if kind == WebTarget.kind:
        return _jp_nonempty(f"{t}.url")
    if kind in LIBRARY_KINDS:
        return f'({t}.url.type() == "null" || {_jp_nonempty(t + ".url")})'
    if kind == MarketDataTarget.kind:
        return _jp_nonempty(f"{t}.ticker")
    if kind == AccountTarget.kind:
        return _jp_nonempty(f"{t}.accountId")
    if kind == AccountsTarget.kind:
        # Every ref an object first (`.type()` never unwraps), so that the
        # filter below, which would unwrap an array ref, sees objects only.
        all_objects = f'!({t}.accounts[*].type() != "object")'
        bad_id = f"!exists({t}.accounts[*] ? (!{_jp_nonempty('@.accountId')}))"
        return f'({t}.accounts.type() == "array" && {t}.accounts.size() > 0 && {all_objects} && {bad_id})'
    raise ValueError(f"unknown target kind {kind!r}")


def _jp_valid(t: str, kinds: tuple[str, ...]) -> str:
    """A target `t` that `parse_citation_target` reads, of one of `kinds` (jsonpath)."""
    arms = []
    for kind in kinds:
        fields = _jp_kind_fields(kind, t)
        arms.append(f'{t}.kind == "{kind}"' + (f" && {fields}" if fields else ""))
    return f'({t}.type() == "object" && {t}.kind.type() == "string" && ({" || ".join(arms)}))'


def jsonpath_entry(state: str) -> str:
    """The jsonpath filter of one entry `@` in `state`: a target kind, `typed`, `untyped` or `malformed`."""
    if state == "untyped":
        return '@.type() == "object" && !exists(@.target)'
    if state == "malformed":
        return f'@.type() != "object" || (exists(@.target) && !{_jp_valid("@.target", TARGET_KINDS)})'
    kinds = TARGET_KINDS if state == "typed" else (state,)
    return f'@.type() == "object" && {_jp_valid("@.target", kinds)}'


def jsonpath_any(state: str) -> str:
    """A jsonpath for `array @? path`: some entry in `state`, as a GIN-indexable prefilter.

    A superset only: lax mode unwraps an entry that is itself an array, so a
    nested entry may match. `postgresql_entry_sql` gives the exact test.
    """
    return f"$[*] ? ({jsonpath_entry(state)})"


def jsonpath_account_entry(account_id: str) -> str:
    """The jsonpath filter of one entry `@` whose readable `account`/`accounts` target names `account_id` exactly.

    The id is a jsonpath string literal (JSON escaping is valid jsonpath), so
    the whole path is one constant a GIN index can answer.
    """
    literal = json.dumps(account_id)
    one = f"{_jp_valid('@.target', (AccountTarget.kind,))} && @.target.accountId == {literal}"
    several = (
        f"{_jp_valid('@.target', (AccountsTarget.kind,))} && exists(@.target.accounts[*] ? (@.accountId == {literal}))"
    )
    return f'@.type() == "object" && (({one}) || ({several}))'


def postgresql_entry_sql(element: str, entry_filter: str) -> tuple[str, str]:
    """(SQL, jsonpath parameter): the exact test of one `jsonb_array_elements` value against a jsonpath entry filter.

    The value is tested alone (`$ ? (...)` on an object never unwraps), so a
    nested array entry is never taken for an entry. The SQL holds one `%s`.
    """
    return f"(jsonb_typeof({element}) = 'object' AND {element} @? %s::jsonpath)", f"$ ? ({entry_filter})"


def postgresql_malformed_sql(element: str) -> tuple[str, str]:
    """As `postgresql_entry_sql`, for the malformed state: any entry that is no object, too."""
    return f"(jsonb_typeof({element}) <> 'object' OR {element} @? %s::jsonpath)", f"$ ? ({jsonpath_entry('malformed')})"


# -- SQLite --------------------------------------------------------------------


def _sq_nonempty(v: str, path: str) -> str:
    return f"(json_type({v}, '{path}') IS 'text' AND json_extract({v}, '{path}') <> '')"


def _sq_kind_fields(kind: str, v: str) -> str:
    if kind in _KIND_ONLY:
        return ""
    if kind == WebTarget.kind:
        return _sq_nonempty(v, "$.target.url")
    if kind in LIBRARY_KINDS:
        return f"(json_type({v}, '$.target.url') IS 'null' OR {_sq_nonempty(v, '$.target.url')})"
    if kind == MarketDataTarget.kind:
        return _sq_nonempty(v, "$.target.ticker")
    if kind == AccountTarget.kind:
        return _sq_nonempty(v, "$.target.accountId")
    if kind == AccountsTarget.kind:
        # `a.value` is JSON text only for objects: the CASE keeps it from being parsed otherwise.
        bad_ref = f"NOT CASE WHEN a.type = 'object' THEN {_sq_nonempty('a.value', '$.accountId')} ELSE 0 END"
        return (
            f"(json_type({v}, '$.target.accounts') IS 'array' AND json_array_length({v}, '$.target.accounts') > 0"
            f" AND NOT EXISTS (SELECT 1 FROM json_each({v}, '$.target.accounts') AS a WHERE {bad_ref}))"
        )
    raise ValueError(f"unknown target kind {kind!r}")


def _sq_valid(v: str, kinds: tuple[str, ...]) -> str:
    arms = []
    for kind in kinds:
        fields = _sq_kind_fields(kind, v)
        arms.append(f"(json_extract({v}, '$.target.kind') = '{kind}'" + (f" AND {fields})" if fields else ")"))
    guard = f"json_type({v}, '$.target') IS 'object' AND json_type({v}, '$.target.kind') IS 'text'"
    return f"({guard} AND ({' OR '.join(arms)}))"


def sqlite_entry(state: str, e: str = "e") -> str:
    """SQLite condition on a `json_each` row `e` being an entry in `state` (as `jsonpath_entry`)."""
    v = f"{e}.value"
    if state == "untyped":
        body = f"json_type({v}, '$.target') IS NULL"
    elif state == "malformed":
        body = f"json_type({v}, '$.target') IS NOT NULL AND NOT {_sq_valid(v, TARGET_KINDS)}"
        return f"CASE WHEN {e}.type = 'object' THEN {body} ELSE 1 END"
    else:
        body = _sq_valid(v, TARGET_KINDS if state == "typed" else (state,))
    return f"CASE WHEN {e}.type = 'object' THEN {body} ELSE 0 END"


def sqlite_account_id(e: str = "e") -> str:
    """SQLite condition on `json_each` row `e` naming an account id; takes the id twice as parameters."""
    v = f"{e}.value"
    one = f"{_sq_valid(v, (AccountTarget.kind,))} AND json_extract({v}, '$.target.accountId') = %s"
    in_ref = "CASE WHEN a.type = 'object' THEN json_extract(a.value, '$.accountId') = %s ELSE 0 END"
    refs = f"SELECT 1 FROM json_each({v}, '$.target.accounts') AS a WHERE {in_ref}"
    several = f"{_sq_valid(v, (AccountsTarget.kind,))} AND EXISTS ({refs})"
    return f"CASE WHEN {e}.type = 'object' THEN (({one}) OR ({several})) ELSE 0 END"


# -- support (SPEC 15, docs/support.md) -------------------------------------------
# The support status of each inline citation, as `citations.support.support_status` reads it: the stored
# `support`'s status when `read_support` reads it, else `unchecked`. Spelled in SQL (not jsonpath) for the
# exact test, since only SQL tells a JSON integer (`5`) from a number Python reads as a float (`5.0`).


def jsonpath_support_any(statuses: tuple[str, ...]) -> str:
    """A jsonpath for `inline_citations @? path`: some entry whose `support.status` is one of `statuses`.

    A GIN-indexable prefilter only (a superset): the exact status is `postgresql_support_statuses`'s.
    """
    arms = " || ".join(f"@.support.status == {json.dumps(status)}" for status in statuses)
    return f"$[*] ? ({arms})"


def postgresql_support_prefilter(column: str) -> str:
    """SQL, one `%s` parameter (a `jsonpath_support_any` path): `jsonb_path_exists(column, path, '{}', true)`,
    which is `column @? path` (silent, as `@?` is) spelled as a function.

    Spelled so for the planner: migration 0011's partial index per support choice has this predicate word for
    word, so a filtered list page reads the first 100 entries of that index in its order; and a boolean
    function is estimated to hold for a third of the rows, where `@?` on a jsonb column this wide (no
    statistics) is guessed at a few, which made PostgreSQL read every match and sort them (17 s at 1,000,000
    rows, bench/admin.py).
    """
    return f"jsonb_path_exists({column}, %s::jsonpath, '{{}}'::jsonb, true)"


def _pg_support_readable() -> str:
    """SQL: the `support` of the `jsonb_array_elements` value `e` is one `read_support` reads."""
    s = "(e -> 'support')"
    unmatched = f"(CASE WHEN jsonb_typeof({s} -> 'unmatched') = 'array' THEN {s} -> 'unmatched' ELSE '[]' END)"
    # Each figure: an object with a string `text` and integer `start` <= `end`, both >= 0. A jsonb number's
    # text has no exponent, so the digits test is exact; the CASE keeps the casts from a non-number.
    figure_ok = (
        "CASE WHEN jsonb_typeof(u) = 'object' AND jsonb_typeof(u -> 'text') = 'string'"
        " AND jsonb_typeof(u -> 'start') = 'number' AND jsonb_typeof(u -> 'end') = 'number'"
        " AND (u ->> 'start') ~ '^[0-9]+$' AND (u ->> 'end') ~ '^[0-9]+$'"
        " THEN (u ->> 'start')::numeric <= (u ->> 'end')::numeric ELSE false END"
    )
    digest = f"({s} -> 'digest')"
    return (
        f"(jsonb_typeof(e) = 'object' AND jsonb_typeof({s}) = 'object'"
        f" AND jsonb_typeof({s} -> 'status') = 'string' AND ({s} ->> 'status') IN {_STATUSES_SQL}"
        f" AND jsonb_typeof({s} -> 'unmatched') = 'array'"
        f" AND ({digest} IS NULL OR jsonb_typeof({digest}) = 'null'"
        f" OR (jsonb_typeof({digest}) = 'string' AND ({s} ->> 'digest') ~ '^sha256:[0-9a-f]{{64}}$'))"
        f" AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements({unmatched}) AS u WHERE NOT ({figure_ok})))"
    )


def postgresql_support_statuses(column: str) -> str:
    """A query of one row per entry of the jsonb array `column`: its support status, as `status`.

    `OFFSET 0` keeps PostgreSQL from inlining the status into each use of it (a count per status would
    compute it once per status).
    """
    status = f"CASE WHEN {_pg_support_readable()} THEN e -> 'support' ->> 'status' ELSE '{UNCHECKED}' END"
    return f"SELECT {status} AS status FROM jsonb_array_elements({column}) AS e OFFSET 0"


def postgresql_support_in(column: str, count: int) -> str:
    """SQL: some entry of `column` has a support status among `count` parameters, none of them `unchecked`.

    The stored status is compared first (cheap, and PostgreSQL orders a WHERE's conditions by cost); only an
    entry that names one is read whole.
    """
    placeholders = ", ".join(["%s"] * count)
    return (
        f"EXISTS (SELECT 1 FROM jsonb_array_elements({column}) AS e"
        f" WHERE (e -> 'support' ->> 'status') IN ({placeholders}) AND {_pg_support_readable()})"
    )


def _sqlite_support_readable() -> str:
    """SQL: `s`, the JSON text of an entry's `support` object, is one `read_support` reads."""
    figure_ok = (
        "CASE WHEN u.type = 'object' THEN json_type(u.value, '$.text') IS 'text'"
        " AND json_type(u.value, '$.start') IS 'integer' AND json_type(u.value, '$.end') IS 'integer'"
        " AND json_extract(u.value, '$.start') >= 0"
        " AND json_extract(u.value, '$.start') <= json_extract(u.value, '$.end') ELSE 0 END"
    )
    digest_type, digest = "json_type(s, '$.digest')", "json_extract(s, '$.digest')"
    return (
        f"(json_type(s, '$.status') IS 'text' AND json_extract(s, '$.status') IN {_STATUSES_SQL}"
        " AND json_type(s, '$.unmatched') IS 'array'"
        f" AND ({digest_type} IS NULL OR {digest_type} IS 'null' OR ({digest_type} IS 'text'"
        f" AND length({digest}) = 71 AND substr({digest}, 1, 7) = 'sha256:'"
        f" AND NOT glob('*[^0-9a-f]*', substr({digest}, 8))))"
        f" AND NOT EXISTS (SELECT 1 FROM json_each(s, '$.unmatched') AS u WHERE NOT ({figure_ok})))"
    )


def _sqlite_supports(column: str) -> str:
    """A query of each entry's `support` JSON text as `s` (NULL when the entry or its support is no object).

    Read out of the entry once: SQLite parses JSON text on every call, and a support is much shorter than
    its entry. `e.value` is JSON text only for objects, hence the CASE.
    """
    support = (
        "CASE WHEN e.type = 'object' AND json_type(e.value, '$.support') IS 'object'"
        " THEN json_extract(e.value, '$.support') END"
    )
    return f"SELECT {support} AS s FROM json_each({column}) AS e"


def sqlite_support_statuses(column: str) -> str:
    """A query of one row per entry of the JSON array `column`: its support status, as `status`."""
    readable = _sqlite_support_readable()
    status = f"CASE WHEN s IS NOT NULL AND {readable} THEN json_extract(s, '$.status') ELSE '{UNCHECKED}' END"
    return f"SELECT {status} AS status FROM ({_sqlite_supports(column)})"


def sqlite_support_in(column: str, count: int) -> str:
    """As `postgresql_support_in`, on SQLite (whose AND stops at the first false condition)."""
    placeholders = ", ".join(["%s"] * count)
    return (
        f"EXISTS (SELECT 1 FROM ({_sqlite_supports(column)})"
        f" WHERE s IS NOT NULL AND json_extract(s, '$.status') IN ({placeholders}) AND {_sqlite_support_readable()})"
    )


_STATUSES_SQL = "(" + ", ".join(f"'{status}'" for status in SUPPORT_STATUSES) + ")"


# --- the expressions ------------------------------------------------------------

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
    "jsonpath_support_any",
    "postgresql_support_prefilter",
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

    PostgreSQL: the prefilter `postgresql_support_prefilter` (the jsonpath of `jsonpath_support_any`), which
    the choice's partial index of migration 0011 holds in the list's order, then the exact status per entry;
    `unchecked` (a missing or malformed support too) is a negation no index answers: exact test only, as
    `untyped` is.
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
        return f"({postgresql_support_prefilter(column)} AND {exact})", [
            jsonpath_support_any(self.statuses),
            *self.statuses,
        ]

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
