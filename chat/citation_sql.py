"""The citation states of `citations.summary.classify_citation`, and the support status of an inline
citation (`citations.support.support_status`), as SQL for each database.

One table of rules (`_RULES`, docs/targets.md#wire-format, the same as
`parse_citation_target`) gives two spellings: a PostgreSQL jsonpath in lax
mode, with a `.type()` guard at every level so that lax mode never unwraps
an array nor compares across types (a GIN `jsonb_path_ops` index answers
`@?` with these paths), and a SQLite JSON1 condition over one `json_each`
element. `chat.citation_queries` wraps them in Django expressions; tests
tie both to `classify_citation` over random rows.

A jsonpath `@` is a citation entry; a SQLite `{v}` is the entry's JSON text
(`json_each.value`, only ever read when `json_each.type` is 'object').
SQLite comparisons use `IS` (null-safe: `json_type` of a missing key is
NULL) so that the `NOT` of the malformed state never meets a NULL.
"""

# SQL below is built from constant fragments and compiled column names only;
# every value (a term, an id, a jsonpath) travels as a parameter.
# ruff: noqa: S608
from __future__ import annotations

import json

from citations.support import SUPPORT_STATUSES, UNCHECKED
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
