"""`execute_sql` output -> blocks, one per account label (docs/citable.md#execute_sql).

Row text (our format, docs/citable.md): one text per row,
`"; ".join(f"{column}: {value}")` in column order (the output's `columns`
list first, when given, then the row's own keys in row order), leaving out
`ROUTING_COLUMNS`. Values as `blocks.value_text`. A row that is not an
object is its value. Texts are rendered lazily (`RowTexts`): recording a turn
needs only sources, titles and targets, so the caller must not mutate the
tool output after the call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from django.utils.text import slugify

from citations.accounts import ACCOUNT_ID_COLUMNS, account_ref_from_row, is_account_id
from citations.citable.blocks import PORTFOLIO, PORTFOLIO_SOURCE, PORTFOLIO_TITLE, SearchResult, is_blank, value_text
from citations.citable.spec import ToolSpec
from citations.json_checks import expect
from citations.pooling import accounts_target
from citations.targets import AccountRef, CitationTarget

__all__ = [
    "ACCOUNT_SOURCE_PREFIX",
    "EMPTY_ROWS_TEXT",
    "EXECUTE_SQL",
    "LABEL_COLUMNS",
    "NO_ROWS_TEXT",
    "ROUTING_COLUMNS",
    "RowTexts",
    "check_sql_output",
    "render_sql_row",
    "sql_blocks",
]

ACCOUNT_SOURCE_PREFIX = "silvia://your-account/"
NO_ROWS_TEXT = "The query returned no rows."
# Rows that are all `{}`: there is something to cite (the row count), and a
# block must not be empty.
EMPTY_ROWS_TEXT = "The query returned rows without columns."

LABEL_COLUMNS: tuple[str, ...] = ("account_name", "account_display_name", "account_official_name")
"""Columns that may label an account, in order of preference (docs/citable.md#execute_sql)."""

ROUTING_COLUMNS: frozenset[str] = frozenset({"source", *ACCOUNT_ID_COLUMNS})
"""Columns left out of a row's text: `source` names a vendor, which never
appears in text a user may see (docs/privacy.md), and the id columns are
carried by the block's target instead (the golden `cited_text` has neither)."""

# The id columns consulted when `source_account_id` holds no id (docs/accounts.md).
_FALLBACK_COLUMNS = ("snaptrade_account_id", "manual_account_uuid", "account_uuid", "account_id")

# Cell types whose f-string spelling is already the text we want.
_PLAIN_CELL_TYPES = frozenset({str, int, float})


class _Group:
    """One block while rows are read: its title, rows, and the accounts they name."""

    __slots__ = ("refs", "rows", "title", "typed")

    def __init__(self, title: str, typed: bool) -> None:
        self.title = title
        self.rows: list[object] = []
        self.refs: list[AccountRef] = []
        self.typed = typed  # False for the portfolio, and once a row names no account


def sql_blocks(tool_input: Mapping[str, object], output: Mapping[str, object]) -> list[SearchResult]:
    """The blocks of one `execute_sql` output (docs/citable.md#execute_sql).

    `output` is `{"rows": [...], "columns"?: [...]}`; without a `rows` list
    there are no blocks. The input (the query) is not read. Never raises.
    """
    rows = output.get("rows")
    if not isinstance(rows, list):
        return []  # an error payload, not a result
    if not rows:
        return [SearchResult(PORTFOLIO_SOURCE, PORTFOLIO_TITLE, (NO_ROWS_TEXT,), PORTFOLIO)]
    columns = _sql_columns(output.get("columns"))
    label_column = next((c for c in LABEL_COLUMNS if any(_has(row, c) for row in rows)), None)
    if label_column is None:
        return [SearchResult(PORTFOLIO_SOURCE, PORTFOLIO_TITLE, RowTexts(rows, columns, EMPTY_ROWS_TEXT), PORTFOLIO)]

    groups: dict[str, _Group] = {}

    def group_of(row: object) -> _Group:
        """The row's block (created on first use), with the row's account folded in."""
        label = _label_text(row.get(label_column)) if isinstance(row, Mapping) else None
        if label is None:
            source, title = PORTFOLIO_SOURCE, PORTFOLIO_TITLE
        else:
            source, title = ACCOUNT_SOURCE_PREFIX + (slugify(label) or "account"), label
        group = groups.get(source)
        if group is None:
            group = groups[source] = _Group(title, typed=label is not None)
        if group.typed:
            ref = account_ref_from_row(row)
            if ref is None:
                group.typed = False  # one row naming no account untypes the block
            else:
                group.refs.append(ref)
        return group

    # Rows with the same label and account columns fall in the same block and
    # name the same account: decide each distinct key once (a 100,000-row
    # result has a few dozen). When `source_account_id` holds an id, it and
    # `source` alone decide the account (step 1 of docs/accounts.md), so the
    # short key (label, source_account_id, source) is remembered too. Only
    # keys with a str/null label are stored: 1, 1.0 and True are one dict key
    # but three labels, and none of them equals a stored key.
    decided: dict[tuple[object, ...], _Group] = {}
    for row in rows:
        if type(row) is not dict:
            group = group_of(row)
            group.rows.append(row)
            continue
        short = (row.get(label_column), row.get("source_account_id"), row.get("source"))
        key: tuple[object, ...] | None = None
        try:
            found = decided.get(short) or decided.get(key := (*short, *map(row.get, _FALLBACK_COLUMNS)))
        except TypeError:  # an unhashable cell: decide this row alone
            found, key = None, None
        if found is None:
            found = group_of(row)
            if key is not None and (short[0] is None or type(short[0]) is str):
                decided[key] = found
                if is_account_id(short[1]):
                    decided[short] = found
        group = found
        group.rows.append(row)

    return [
        SearchResult(source, group.title, RowTexts(group.rows, columns, EMPTY_ROWS_TEXT), _target(source, group))
        for source, group in groups.items()
    ]


def _target(source: str, group: _Group) -> CitationTarget | None:
    """Portfolio for the portfolio block; the pooled accounts when every row named one; else none."""
    if source == PORTFOLIO_SOURCE:
        return PORTFOLIO
    return accounts_target(group.refs) if group.typed and group.refs else None


def _has(row: object, column: str) -> bool:
    return isinstance(row, Mapping) and column in row


def _sql_columns(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    seen: dict[str, None] = {}
    for name in value:
        if isinstance(name, str):
            seen.setdefault(name, None)
    return tuple(seen) or None


def _label_text(value: object) -> str | None:
    """The label as shown, or `None` when null or blank (those rows go to the portfolio)."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value
    else:
        # A non-string label is compared and shown as `str(value)`.
        try:
            text = str(value)
        except Exception:  # huge ints, hostile objects
            text = value_text(value)
    return None if is_blank(text) else text


def render_sql_row(row: object, columns: Sequence[str] | None = None) -> str:
    """One SQL row as text: `"col: value; col: value"` (docs/citable.md#execute_sql, our format).

    Column order: `columns` first (names the row lacks are skipped), then the
    row's other keys in row order; `ROUTING_COLUMNS` are left out. Values as
    `value_text`: strings as they are, `null`, `true`/`false`, numbers as
    Python prints them, objects and lists as JSON. A row that is not an
    object is shown as its value alone. Never raises.
    """
    if not isinstance(row, Mapping):
        return value_text(row)
    if columns:
        keys = [c for c in columns if c in row]
        if len(keys) != len(row):
            listed = set(keys)
            keys.extend(k for k in row if k not in listed)
        items: Any = [(k, row[k]) for k in keys if k not in ROUTING_COLUMNS]
    else:
        items = [(k, v) for k, v in row.items() if k not in ROUTING_COLUMNS]
    plain = _PLAIN_CELL_TYPES
    try:
        # Strings and numbers (most cells) skip the function call.
        return "; ".join([f"{k}: {v}" if type(v) in plain else f"{k}: {value_text(v)}" for k, v in items])
    except ValueError:  # an int over Python's int-to-str digit limit
        return "; ".join([f"{k}: {value_text(v)}" for k, v in items])


class RowTexts(Sequence[str]):
    """The texts of a SQL block: one per row, rendered on first use.

    Behaves as an immutable sequence of non-blank strings (rows that render
    blank are dropped; if none is left, `fallback` is the only text).
    Compares equal to any sequence with the same strings.
    """

    __slots__ = ("_columns", "_fallback", "_rows", "_texts")

    def __init__(self, rows: list[object], columns: Sequence[str] | None, fallback: str) -> None:
        self._rows = rows
        self._columns = columns
        self._fallback = fallback
        self._texts: tuple[str, ...] | None = None

    def _materialise(self) -> tuple[str, ...]:
        texts = self._texts
        if texts is None:
            rendered = (render_sql_row(row, self._columns) for row in self._rows)
            texts = tuple(text for text in rendered if not is_blank(text)) or (self._fallback,)
            self._texts, self._rows = texts, []  # drop the rows once rendered
        return texts

    def __len__(self) -> int:
        return len(self._materialise())

    def __getitem__(self, index: Any) -> Any:
        return self._materialise()[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._materialise())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RowTexts):
            return self._materialise() == other._materialise()
        if isinstance(other, Sequence) and not isinstance(other, str):
            return self._materialise() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._materialise())

    def __repr__(self) -> str:
        return f"RowTexts({list(self._materialise())!r})"


# --- the tool, declared once (docs/tools.md#one-spec-per-tool) ---------------


def check_sql_output(tool_input: Mapping[str, Any], output: Mapping[str, Any], path: str) -> None:
    """A record's check of what `sql_blocks` reads: `rows` a list of objects, `columns` null or a list of strings.

    Raises `TurnRecordError` at `path.rows[i]`, `path.columns[i]`, ... (docs/turns.md#the-record).
    """
    rows = expect(output.get("rows"), list, f"{path}.rows", "a list")
    for i, row in enumerate(rows):
        expect(row, dict, f"{path}.rows[{i}]", "an object")
    columns = output.get("columns")
    if columns is not None:
        for i, column in enumerate(expect(columns, list, f"{path}.columns", "a list of column names")):
            expect(column, str, f"{path}.columns[{i}]", "a string")


EXECUTE_SQL = ToolSpec(
    name="execute_sql",
    input_schema={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "one SELECT statement"}},
        "required": ["query"],
    },
    check_output=check_sql_output,
    citable=sql_blocks,
    prompt_sources=(
        f"{ACCOUNT_SOURCE_PREFIX}<account> for rows of one account; {PORTFOLIO_SOURCE} for rows not tied to one account"
    ),
)
"""`execute_sql` (docs/citable.md#execute_sql; its executor: `finance.sql_tool.ExecuteSqlTool`)."""
