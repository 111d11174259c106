"""Citable content: tool output -> `search_result` blocks with targets (SPEC section 4).

`to_citable_content(tool_name, tool_input, output)` is the one entry point.
It never raises on JSON-like input: a field of the wrong type counts as
absent, and a tool output it cannot read gives no blocks.

Text rendering (the SPEC leaves it to us):

- SQL: one text per row, `"; ".join(f"{column}: {value}")` in column order
  (the output's `columns` list first, when given, then the row's own keys in
  row order). Values: strings as they are, `null`, `true`/`false`, numbers as
  Python prints them (`310.0`), nested objects and lists as JSON
  (`json.dumps`, non-ASCII kept). A row that is not an object is its value.
  Row texts are rendered lazily (see `RowTexts`): recording a turn needs only
  sources, titles and targets, and a 100,000-row result should cost about as
  much as reading its id and label columns. So the caller must not mutate
  the tool output after the call.
- Python: a JSON document (the whole stdout, or one line) is cited as printed;
  a sub-item (a ticker object inside a list, a non-article Exa item, an
  article without `text`) as JSON; consecutive non-JSON lines form one text.
- Library documents: the document's `content`.
- Web results: the result's `text`, else its `title`.

Every text carries non-whitespace characters (the Messages API rejects
blank text blocks); a block with nothing to cite is not emitted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any
from urllib.parse import urlsplit

from django.utils.text import slugify

from citations.accounts import ACCOUNT_ID_COLUMNS, account_ref_from_row, is_account_id
from citations.targets import (
    AccountRef,
    AccountTarget,
    AccountsTarget,
    AnalysisTarget,
    CardDocumentTarget,
    CitationTarget,
    MarketDataTarget,
    MortgageReferenceTarget,
    PortfolioTarget,
    TaxReferenceTarget,
    WebTarget,
)
from citations.urls import humanize_citation_url

__all__ = [
    "ACCOUNT_SOURCE_PREFIX",
    "ANALYSIS_SOURCE",
    "FINNHUB_SOURCE",
    "FINNHUB_TICKER_SOURCE_PREFIX",
    "LABEL_COLUMNS",
    "LIBRARY_SOURCE_PREFIXES",
    "LIBRARY_TOOLS",
    "PORTFOLIO_SOURCE",
    "SEARCH_WEB_SOURCE",
    "RowTexts",
    "SearchResult",
    "is_http_url",
    "render_sql_row",
    "to_citable_content",
    "valid_ticker",
]

PORTFOLIO_SOURCE = "silvia://your-portfolio"
PORTFOLIO_TITLE = "Your portfolio"
ACCOUNT_SOURCE_PREFIX = "silvia://your-account/"
ANALYSIS_SOURCE = "silvia://analysis"
ANALYSIS_TITLE = "Analysis"
FINNHUB_SOURCE = "silvia://market-data/finnhub"
FINNHUB_TITLE = "Live data"
FINNHUB_TICKER_SOURCE_PREFIX = FINNHUB_SOURCE + "/"
SEARCH_WEB_SOURCE = "silvia://search/search_web"
SEARCH_WEB_TITLE = "Web search"

NO_ROWS_TEXT = "The query returned no rows."
# Rows that are all `{}`: there is something to cite (the row count), and a
# block must not be empty.
EMPTY_ROWS_TEXT = "The query returned rows without columns."

LABEL_COLUMNS: tuple[str, ...] = ("account_name", "account_display_name", "account_official_name")
"""Columns that may label an account, in order of preference (SPEC section 4)."""

LIBRARY_TOOLS: dict[str, tuple[str, type[CitationTarget]]] = {
    "read_tax_authority": ("silvia://tax-authority/", TaxReferenceTarget),
    "read_credit_card_document": ("silvia://credit-card-corpus/", CardDocumentTarget),
    "read_mortgage_authority": ("silvia://mortgage-code/", MortgageReferenceTarget),
}
"""Library tool name -> (source prefix for `<path>`, target kind) (SPEC section 4)."""

LIBRARY_SOURCE_PREFIXES: dict[str, type[CitationTarget]] = {
    prefix: kind for prefix, kind in LIBRARY_TOOLS.values()
}
"""Library source prefix -> target kind (the backfill reads sources back, section 12)."""

_PORTFOLIO = PortfolioTarget()
_ANALYSIS = AnalysisTarget()

# 1 to 10 of A-Z 0-9 . -, starting with a letter. Checked on the upper-cased
# value after an ASCII check: "ß".upper() is "SS", which must not pass.
_TICKER = re.compile(r"[A-Z][A-Z0-9.-]{0,9}")
# "in any case" means ASCII case: re.ASCII keeps e.g. dotless ı from matching i.
_FINNHUB = re.compile("finnhub", re.IGNORECASE | re.ASCII)


# --------------------------------------------------------------------------
# Blocks


class SearchResult:
    """One `search_result` block and the target of its source (SPEC section 4).

    `source` and `title` are what the model's citations echo back. `texts` is
    a non-empty `list[str]` of non-blank strings, one Anthropic text block
    each (a new list on every read). `target` is the source's target, or
    `None` when the source is untyped. `to_block()` leaves the target out:
    the model never sees it.

    A SQL block renders its row texts on first read of `texts` (or
    `to_block()`), not when the block is made: deriving targets needs none of
    them, and rendering is most of the cost on a 100,000-row result. So the
    tool output must not be changed after `to_citable_content` returned.
    """

    __slots__ = ("_texts", "source", "target", "title")

    def __init__(self, source: str, title: str, texts: Sequence[str], target: CitationTarget | None = None) -> None:
        self.source = source
        self.title = title
        self._texts = texts  # a tuple, or a lazy `RowTexts`
        self.target = target

    @property
    def texts(self) -> list[str]:
        return list(self._texts)

    def to_block(self) -> dict[str, Any]:
        """The Anthropic `search_result` content block (a new dict)."""
        return {
            "type": "search_result",
            "source": self.source,
            "title": self.title,
            "content": [{"type": "text", "text": text} for text in self._texts],
            "citations": {"enabled": True},
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SearchResult):
            return NotImplemented
        return (self.source, self.title, self.target, self.texts) == (other.source, other.title, other.target, other.texts)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        # No target or texts: they may hold account ids and the user's rows (SPEC section 9).
        return f"SearchResult(source={self.source!r}, title={self.title!r})"


def _is_blank(text: str) -> bool:
    return not text or text.isspace()


class _Collector:
    """Blocks in order of first appearance; a repeated source appends its texts.

    The first title (and target) of a source stays.
    """

    __slots__ = ("_blocks",)

    def __init__(self) -> None:
        self._blocks: dict[str, tuple[str, list[str], CitationTarget | None]] = {}

    def add(self, source: str, title: str, text: str, target: CitationTarget | None) -> None:
        if _is_blank(text):
            return
        block = self._blocks.get(source)
        if block is None:
            self._blocks[source] = (title, [text], target)
        else:
            block[1].append(text)

    def results(self) -> list[SearchResult]:
        return [
            SearchResult(source, title, tuple(texts), target)
            for source, (title, texts, target) in self._blocks.items()
        ]


# --------------------------------------------------------------------------
# Shared helpers


def is_http_url(value: object) -> bool:
    """Whether `value` is a `str` URL with scheme `http` or `https` and a host.

    The scheme is matched case-insensitively (as URLs define it). Never raises.
    """
    if not isinstance(value, str) or not value[:8].lower().startswith(("http://", "https://")):
        return False
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def valid_ticker(value: object) -> str | None:
    """The upper-cased ticker, or `None` when `value` is not a valid one (SPEC section 4).

    Valid: a `str` of 1 to 10 ASCII characters of `A-Z 0-9 . -` once
    upper-cased, starting with a letter. Any non-ASCII character makes it
    invalid. Never raises.
    """
    if not isinstance(value, str) or not value.isascii():
        return None
    ticker = value.upper()
    return ticker if _TICKER.fullmatch(ticker) else None


def _nonblank_str(value: object) -> str | None:
    return value if isinstance(value, str) and not _is_blank(value) else None


def _json_text(value: object) -> str:
    """Compact JSON for a nested value; never raises (falls back to `str`)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    except (ValueError, TypeError, RecursionError):
        # Circular or absurdly deep structures cannot come from JSON, but
        # the no-raise promise covers any Python value.
        try:
            return str(value)
        except Exception:  # noqa: BLE001 - last resort for a hostile __str__
            return f"<{type(value).__name__}>"


def _value_text(value: object) -> str:
    """A cell as text: strings as-is, `null`, `true`/`false`, numbers as Python
    prints them (`310.0`, `nan`), objects and lists as JSON. Never raises."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        try:
            return str(value)
        except ValueError:  # an int over Python's int-to-str digit limit
            return hex(value)  # type: ignore[arg-type]
    return _json_text(value)


# --------------------------------------------------------------------------
# execute_sql
#
# Grouping runs in one of two ways with identical results (a property test
# compares them with a naive reading of the rule):
#
# - `_sql_groups_by_keys`, the fast path: C-level passes (`itemgetter`,
#   `map(dict.get, ...)`, `dict.fromkeys`) collect the distinct tuples of the
#   label and id columns in first-seen order, and the rules run once per
#   tuple. Rows are bucketed per block only when a block's texts are first
#   read. It applies when every row is a dict, those values are hashable and
#   labels are strings or null.
# - `_sql_groups_by_rows`, the general path: one Python pass over the rows,
#   with the account rule run once per distinct id key per group.
#
# A row is a dict (any `Mapping` is read like one); anything else is a row
# without columns, shown as its value.


# Cell types whose f-string spelling is already the text we want.
_PLAIN_CELL_TYPES = frozenset({str, int, float})

ROUTING_COLUMNS: frozenset[str] = frozenset({"source", *ACCOUNT_ID_COLUMNS})
"""Columns left out of a row's text: `source` names a vendor, which never
appears in text a user may see (SPEC section 9), and the id columns are
carried by the block's target instead (the golden `cited_text` has neither)."""


def render_sql_row(row: object, columns: Sequence[str] | None = None) -> str:
    """One SQL row as text: `"col: value; col: value"` (SPEC section 4, our format).

    Column order: `columns` first (names the row lacks are skipped), then the
    row's other keys in row order; `ROUTING_COLUMNS` are left out. Values as `_value_text`: strings as they
    are, `null`, `true`/`false`, numbers as Python prints them, objects and
    lists as JSON. A row that is not an object is shown as its value alone.
    Never raises.
    """
    if not isinstance(row, Mapping):
        return _value_text(row)
    if columns:
        keys = [c for c in columns if c in row]
        if len(keys) != len(row):
            listed = set(keys)
            keys.extend(k for k in row if k not in listed)
        items: Any = [(k, row[k]) for k in keys if k not in ROUTING_COLUMNS]
    else:
        hidden = ROUTING_COLUMNS
        items = [(k, v) for k, v in row.items() if k not in hidden]
    plain = _PLAIN_CELL_TYPES
    try:
        # Strings and numbers (most cells) skip the function call.
        return "; ".join(
            [f"{k}: {v}" if type(v) in plain else f"{k}: {_value_text(v)}" for k, v in items]
        )
    except ValueError:  # an int over Python's int-to-str digit limit
        return "; ".join([f"{k}: {_value_text(v)}" for k, v in items])


class RowTexts(Sequence[str]):
    """The texts of a SQL block: one per row, rendered on first use.

    Behaves as an immutable sequence of non-blank strings (rows that render
    blank are dropped; if none is left, `fallback` is the only text).
    Compares equal to any sequence with the same strings. `rows` is the
    block's rows, or a callable returning them (computed on first use).
    """

    __slots__ = ("_columns", "_fallback", "_rows", "_texts")

    def __init__(
        self,
        rows: list[object] | Callable[[], list[object]],
        columns: Sequence[str] | None,
        fallback: str,
    ) -> None:
        self._rows = rows
        self._columns = columns
        self._fallback = fallback
        self._texts: tuple[str, ...] | None = None

    def _materialise(self) -> tuple[str, ...]:
        texts = self._texts
        if texts is None:
            rows = self._rows() if callable(self._rows) else self._rows
            columns = self._columns
            texts = tuple(
                text for text in (render_sql_row(row, columns) for row in rows) if not _is_blank(text)
            ) or (self._fallback,)
            self._texts, self._rows = texts, []  # drop the rows once rendered
        return texts

    def __len__(self) -> int:
        return len(self._materialise())

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
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


class _SqlGroup:
    """One block of a SQL result: its title, and the accounts its rows name so far."""

    __slots__ = ("refs", "rows", "seen", "title", "typed")

    def __init__(self, title: str, typed: bool) -> None:
        self.title = title
        # False once a row names no account (and always for the portfolio).
        self.typed = typed
        self.refs: dict[str, AccountRef] = {}
        # Id keys whose account is already folded in (general path).
        self.seen: set[tuple[object, ...]] = set()
        self.rows: list[object] = []  # filled by the general path only

    def fold(self, ref: AccountRef | None) -> None:
        """Add one row's account, or untype the group when the row names none."""
        if ref is None:
            self.typed = False
            self.refs.clear()
            self.seen.clear()
            return
        known = self.refs.get(ref.account_id)
        # Same rule as `merge_account_refs`, kept incremental here.
        if known is None or (known.provider is None and ref.provider is not None):
            self.refs[ref.account_id] = ref

    def target(self) -> CitationTarget | None:
        if not self.typed or not self.refs:
            return None
        refs = tuple(self.refs.values())
        if len(refs) == 1:
            return AccountTarget(refs[0].account_id, refs[0].provider)
        return AccountsTarget(refs)


class _SqlGroups:
    """Label -> group bookkeeping shared by both paths (blocks in first-seen order)."""

    __slots__ = ("by_label", "by_source", "portfolio")

    def __init__(self) -> None:
        self.by_source: dict[str, _SqlGroup] = {}
        # str/None label (or a non-string label's text) -> group
        self.by_label: dict[str | None, _SqlGroup] = {}
        self.portfolio: _SqlGroup | None = None

    def for_label(self, label: object) -> _SqlGroup:
        """The group of a label value (null or blank: the portfolio).

        Cached per label text, so slugify runs once per distinct text (a
        non-string label shares the entry of its text: same slug, same block).
        """
        text = _label_text(label)
        if text is None:
            if self.portfolio is None:
                self.portfolio = self.by_source[PORTFOLIO_SOURCE] = _SqlGroup(PORTFOLIO_TITLE, False)
            return self.portfolio
        group = self.by_label.get(text)
        if group is None:
            source = ACCOUNT_SOURCE_PREFIX + (slugify(text) or "account")
            group = self.by_source.get(source)
            if group is None:
                group = self.by_source[source] = _SqlGroup(text, True)
            self.by_label[text] = group
        return group

    def for_str_label(self, label: str | None) -> _SqlGroup:
        """`for_label` cached per distinct string/null label (slugify once each)."""
        group = self.by_label.get(label)
        if group is None:
            group = self.by_label[label] = self.for_label(label)
        return group


def _sql_columns(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    seen: dict[str, None] = {}
    for name in value:
        if isinstance(name, str):
            seen.setdefault(name, None)
    return tuple(seen) or None


def _label_column(rows: list[object]) -> str | None:
    """The first of `LABEL_COLUMNS` that is a key of any row."""
    try:
        # C-level scans; stops at the first row holding the column.
        for column in LABEL_COLUMNS:
            if any(map(dict.__contains__, rows, repeat(column))):
                return column
        return None
    except TypeError:  # a row that is not a dict
        for column in LABEL_COLUMNS:
            if any(isinstance(row, Mapping) and column in row for row in rows):
                return column
        return None


def _label_text(value: object) -> str | None:
    """The label as shown, or `None` when null or blank (those rows go to the portfolio)."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value
    else:
        # SPEC: a non-string label is compared and shown as `str(value)`.
        try:
            text = str(value)
        except Exception:  # noqa: BLE001 - huge ints, hostile objects
            text = _value_text(value)
    return None if not text or text.isspace() else text


# The columns that decide a row's account (SPEC section 3), and the fallback
# ones that matter only when `source_account_id` holds no id.
_ACCOUNT_COLUMNS = ("source_account_id", "source")
_FALLBACK_ID_COLUMNS = ("snaptrade_account_id", "manual_account_uuid", "account_uuid", "account_id")


def _sql_groups_by_rows(rows: list[object], label_column: str) -> _SqlGroups:
    """The general path: one Python pass; rows are kept per group."""
    groups = _SqlGroups()
    by_label = groups.by_label
    for row in rows:
        if type(row) is dict or isinstance(row, Mapping):
            label = row.get(label_column)
            group = by_label.get(label) if type(label) is str else None
        else:
            label = group = None
        if group is None:
            if type(label) is str or label is None:
                group = groups.for_str_label(label)  # type: ignore[arg-type]
            else:
                group = groups.for_label(label)
        group.rows.append(row)
        if not group.typed:
            continue
        # A key that decides the row's account: `(source_account_id, source)`
        # when the id is a string (deciding only if it is a valid id: it is
        # remembered only then), else the fallback columns. A repeated key
        # costs a set lookup instead of the regex.
        sid = row.get("source_account_id")  # type: ignore[union-attr]
        if type(sid) is str:
            key: tuple[object, ...] | None = (sid, row.get("source"))  # type: ignore[union-attr]
        else:
            key = (
                row.get("snaptrade_account_id"),  # type: ignore[union-attr]
                row.get("manual_account_uuid"),  # type: ignore[union-attr]
                row.get("account_uuid"),  # type: ignore[union-attr]
                row.get("account_id"),  # type: ignore[union-attr]
            )
        try:
            if key in group.seen:
                continue
        except TypeError:  # an unhashable value: decide this row the slow way
            key = None
        ref = account_ref_from_row(row)  # type: ignore[arg-type]
        group.fold(ref)
        if ref is not None and key is not None and (len(key) != 2 or ref.account_id == sid):
            # A fallback column never yields `sid` itself (it was not a valid
            # id then), so `ref.account_id == sid` means step 1 decided.
            group.seen.add(key)
    return groups


def _any_row_has(rows: list[object], column: str) -> bool:
    """Whether some row has `column` (C-level scan; `TypeError` on a non-dict row)."""
    return any(map(dict.__contains__, rows, repeat(column)))


def _distinct_keys(rows: list[object], columns: tuple[str, ...]) -> list[tuple[object, ...]]:
    """The distinct tuples of `columns` values over `rows`, in first-seen order.

    A missing key counts as null. C-level passes only. Raises `TypeError` for
    a row that is not a dict or an unhashable value.
    """
    try:
        # One C call per row when every row has every column (the usual SQL
        # result); a single column gives bare values, wrapped after dedup.
        if len(columns) == 1:
            return [(value,) for value in dict.fromkeys(map(itemgetter(columns[0]), rows))]
        return list(dict.fromkeys(map(itemgetter(*columns), rows)))
    except KeyError:
        get = dict.get
        return list(dict.fromkeys(zip(*(map(get, rows, repeat(column)) for column in columns))))


def _sql_groups_by_keys(rows: list[object], label_column: str) -> _SqlGroups | None:
    """The fast path, or `None` when it does not apply (see the section comment)."""
    try:
        # Columns no row has are null everywhere: leave them out of the keys.
        columns = (label_column,) + tuple(c for c in _ACCOUNT_COLUMNS if _any_row_has(rows, c))
        if "source_account_id" in columns:
            keys = _distinct_keys(rows, columns)
            decided = all(type(key[1]) is str and is_account_id(key[1]) for key in keys)
        else:
            keys, decided = [], False
        if not decided:
            # Some rows hold no valid source_account_id: the fallback id
            # columns decide them, so they join the keys.
            fallbacks = tuple(c for c in _FALLBACK_ID_COLUMNS if _any_row_has(rows, c))
            if fallbacks or not keys:
                columns += fallbacks
                keys = _distinct_keys(rows, columns)
    except TypeError:  # a row that is not a dict, or an unhashable value
        return None
    if any(type(key[0]) is not str and key[0] is not None for key in keys):
        # 1, 1.0 and True are one dict key but three labels ("1", "1.0", "True").
        return None
    groups = _SqlGroups()
    for key in keys:
        group = groups.for_str_label(key[0])  # type: ignore[arg-type]
        if group.typed:
            # The key holds every column the rule reads, so the rule runs on it.
            group.fold(account_ref_from_row(dict(zip(columns, key))))
    return groups


def _label_values(rows: list[object], label_column: str) -> Iterator[object]:
    """Each row's label value, null when missing (fast path: every row is a dict)."""
    try:
        return iter(list(map(itemgetter(label_column), rows)))
    except KeyError:
        return map(dict.get, rows, repeat(label_column))


class _LazyBuckets:
    """The fast path's rows per block, bucketed in one pass on first use.

    Recording a turn needs no texts, so it never pays for this pass.
    """

    __slots__ = ("_buckets", "_groups", "_label_column", "_rows")

    def __init__(self, rows: list[object], label_column: str, groups: _SqlGroups) -> None:
        self._rows = rows
        self._label_column = label_column
        self._groups = groups
        self._buckets: dict[str, list[object]] | None = None

    def rows_of(self, source: str) -> Callable[[], list[object]]:
        return lambda: self._bucket(source)

    def _bucket(self, source: str) -> list[object]:
        if self._buckets is None:
            groups = self._groups
            source_of_group = {id(group): src for src, group in groups.by_source.items()}
            # Labels are str or None on the fast path; each was registered.
            source_of = {label: source_of_group[id(group)] for label, group in groups.by_label.items()}
            buckets: dict[str, list[object]] = {src: [] for src in groups.by_source}
            for row, label in zip(self._rows, _label_values(self._rows, self._label_column)):
                buckets[source_of[label]].append(row)
            self._buckets = buckets
        return self._buckets[source]


def _execute_sql(output: Mapping[str, object]) -> list[SearchResult]:
    rows = output.get("rows")
    if not isinstance(rows, list):
        return []  # an error payload, not a result
    if not rows:
        return [SearchResult(PORTFOLIO_SOURCE, PORTFOLIO_TITLE, (NO_ROWS_TEXT,), _PORTFOLIO)]
    columns = _sql_columns(output.get("columns"))
    label_column = _label_column(rows)
    if label_column is None:
        texts = RowTexts(rows, columns, EMPTY_ROWS_TEXT)
        return [SearchResult(PORTFOLIO_SOURCE, PORTFOLIO_TITLE, texts, _PORTFOLIO)]

    rows_of: Callable[[str], list[object] | Callable[[], list[object]]]
    groups = _sql_groups_by_keys(rows, label_column)
    if groups is None:
        groups = _sql_groups_by_rows(rows, label_column)
        rows_of = lambda source: groups.by_source[source].rows  # type: ignore[union-attr]  # noqa: E731
    else:
        rows_of = _LazyBuckets(rows, label_column, groups).rows_of

    results = []
    for source, group in groups.by_source.items():
        target = _PORTFOLIO if group is groups.portfolio else group.target()
        # Labelled rows always render non-blank ("account_name: ..."), so the
        # fallback text only guards the invariant.
        texts = RowTexts(rows_of(source), columns, EMPTY_ROWS_TEXT)
        results.append(SearchResult(source, group.title, texts, target))
    return results


# --------------------------------------------------------------------------
# execute_python


class _StrictJSONError(ValueError):
    pass


def _reject_constant(name: str) -> object:
    # json.loads accepts NaN/Infinity/-Infinity; RFC 8259 does not.
    raise _StrictJSONError(name)


# RFC 8259 whitespace only: str.strip() would also drop e.g. U+00A0.
_JSON_WHITESPACE = " \t\n\r"


def _parse_document(text: str) -> object | None:
    """`text` as a strict-JSON object or list, else `None`."""
    stripped = text.strip(_JSON_WHITESPACE)
    if not stripped or stripped[0] not in "[{":
        return None  # cheap: scalars and prose never start with a bracket
    try:
        value = json.loads(stripped, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) else None


def _stdout_pieces(stdout: str) -> list[tuple[object | None, str]]:
    """stdout as (document or None, text) pieces in order (SPEC section 4).

    The whole stdout is one document if it parses to an object or list;
    else each line that does is a document, and runs of other lines are text.
    """
    document = _parse_document(stdout)
    if document is not None:
        return [(document, stdout.strip(_JSON_WHITESPACE))]
    pieces: list[tuple[object | None, str]] = []
    run: list[str] = []
    for line in stdout.split("\n"):
        document = _parse_document(line)
        if document is None:
            run.append(line)
            continue
        if run:
            pieces.append((None, "\n".join(run).strip("\r\n")))
            run = []
        pieces.append((document, line.strip(_JSON_WHITESPACE)))
    if run:
        pieces.append((None, "\n".join(run).strip("\r\n")))
    return pieces


def _is_empty_document(value: object) -> bool:
    return isinstance(value, (dict, list)) and not value


def _exa_articles(document: object) -> list[dict[str, Any]] | None:
    """The articles of an Exa-shaped document (a `results` list with an http(s) `url` object)."""
    if not isinstance(document, dict):
        return None
    results = document.get("results")
    if not isinstance(results, list):
        return None
    if not any(isinstance(item, dict) and is_http_url(item.get("url")) for item in results):
        return None
    return results


def _ticker_of(item: object) -> str | None:
    """The valid ticker of an object's `symbol` (else `ticker`) string."""
    if not isinstance(item, dict):
        return None
    value = item.get("symbol")
    if not isinstance(value, str):
        value = item.get("ticker")
    return valid_ticker(value)


def _execute_python(tool_input: Mapping[str, object], output: Mapping[str, object]) -> list[SearchResult]:
    stdout = output.get("stdout")
    if not isinstance(stdout, str) or _is_blank(stdout):
        return []
    code = tool_input.get("code")
    finnhub = _FINNHUB.search(stdout) is not None or (
        isinstance(code, str) and _FINNHUB.search(code) is not None
    )
    if finnhub:
        rest_source, rest_title = FINNHUB_SOURCE, FINNHUB_TITLE
    else:
        rest_source, rest_title = ANALYSIS_SOURCE, ANALYSIS_TITLE
    blocks = _Collector()

    def rest(text: str) -> None:
        blocks.add(rest_source, rest_title, text, _ANALYSIS)

    for document, text in _stdout_pieces(stdout):
        if document is None:
            rest(text)
            continue
        if _is_empty_document(document):
            continue
        articles = _exa_articles(document)
        if articles is not None:
            for item in articles:
                url = item.get("url") if isinstance(item, dict) else None
                if is_http_url(url):
                    title = _nonblank_str(item.get("title")) or url
                    body = _nonblank_str(item.get("text")) or _json_text(item)
                    blocks.add(url, title, body, WebTarget(url))
                elif not _is_empty_document(item):
                    rest(_json_text(item))
            others = {k: v for k, v in document.items() if k != "results"}  # type: ignore[union-attr]
            if others:
                rest(_json_text(others))
            continue
        if finnhub and isinstance(document, list):
            for item in document:
                if _is_empty_document(item):
                    continue
                ticker = _ticker_of(item)
                if ticker is None:
                    rest(_json_text(item))
                else:
                    blocks.add(
                        FINNHUB_TICKER_SOURCE_PREFIX + ticker,
                        f"{ticker} market data",
                        _json_text(item),
                        MarketDataTarget(ticker),
                    )
            continue
        ticker = _ticker_of(document) if finnhub else None
        if ticker is None:
            rest(text)
        else:
            blocks.add(
                FINNHUB_TICKER_SOURCE_PREFIX + ticker,
                f"{ticker} market data",
                text,
                MarketDataTarget(ticker),
            )
    return blocks.results()


# --------------------------------------------------------------------------
# Library readers


def _library_document(
    tool_name: str, tool_input: Mapping[str, object], output: Mapping[str, object]
) -> list[SearchResult]:
    prefix, kind = LIBRARY_TOOLS[tool_name]
    content = _nonblank_str(output.get("content"))
    if content is None:
        return []  # nothing to cite
    path = _nonblank_str(output.get("path")) or _nonblank_str(tool_input.get("path"))
    meta = output.get("meta")
    if not isinstance(meta, dict):
        meta = {}
    source_url = meta.get("source_url")
    if is_http_url(source_url):
        source = humanize_citation_url(source_url)  # type: ignore[arg-type]
        target = kind(source)  # type: ignore[call-arg]
    elif path is not None:
        source = prefix + path
        target = kind(None)  # type: ignore[call-arg]
    else:
        return []  # no URL and no path: nothing names the document
    file_name = path.rsplit("/", 1)[-1] if path is not None else ""
    title = _nonblank_str(meta.get("title")) or file_name or path or source
    return [SearchResult(source, title, (content,), target)]


# --------------------------------------------------------------------------
# search_web


def _search_web(output: Mapping[str, object]) -> list[SearchResult]:
    results = output.get("results")
    if not isinstance(results, list):
        return []
    blocks = _Collector()
    for result in results:
        if not isinstance(result, dict):
            continue
        title = _nonblank_str(result.get("title"))
        text = _nonblank_str(result.get("text")) or title
        if text is None:
            continue  # nothing to cite
        url = result.get("url")
        if is_http_url(url):
            blocks.add(url, title or url, text, WebTarget(url))
        else:
            blocks.add(SEARCH_WEB_SOURCE, SEARCH_WEB_TITLE, text, None)
    return blocks.results()


# --------------------------------------------------------------------------
# Entry point


def to_citable_content(tool_name: str, tool_input: object, output: object) -> list[SearchResult]:
    """The `search_result` blocks for one tool call, in order of first appearance (SPEC section 4).

    `tool_input` and `output` are the call's JSON objects. Knows
    `execute_sql`, `execute_python`, `read_tax_authority`,
    `read_credit_card_document`, `read_mortgage_authority` and `search_web`;
    any other tool gives `[]`. A non-object input or output, or a field of
    the wrong type, counts as absent; an output missing its main field
    (`rows`, `stdout`, `results`, `content`) gives `[]`. Blocks sharing a
    source are merged (texts appended, first title kept). Never raises.
    """
    if not isinstance(tool_input, dict):
        tool_input = {}
    if not isinstance(output, dict):
        return []
    if tool_name == "execute_sql":
        return _execute_sql(output)
    if tool_name == "execute_python":
        return _execute_python(tool_input, output)
    if tool_name == "search_web":
        return _search_web(output)
    if isinstance(tool_name, str) and tool_name in LIBRARY_TOOLS:
        return _library_document(tool_name, tool_input, output)
    return []
