"""Citable content: tool output -> `search_result` blocks with targets (SPEC section 4).

`to_citable_content(tool_name, tool_input, output)` is the one entry point.
It never raises on JSON-like input: a field of the wrong type counts as
absent, and a tool output it cannot read gives no blocks.

Text rendering (the SPEC leaves it to us):

- SQL: one text per row, `"; ".join(f"{column}: {value}")` in column order
  (the output's `columns` list first, when given, then the row's own keys in
  row order). Values: strings as they are, `null`, `true`/`false`, numbers as
  Python prints them (`310.0`), nested objects and lists as compact JSON.
  Row texts are rendered lazily (see `RowTexts`): recording a turn needs only
  sources, titles and targets, and a 100,000-row result should cost about as
  much as reading its id and label columns.
- Python: a JSON document (the whole stdout, or one line) is cited as printed;
  a sub-item (a ticker object inside a list, a non-article Exa item) as
  compact JSON; consecutive non-JSON lines form one text.
- Library documents: the document's `content`.
- Web results: the result's `text`, else its `title`.

Every text carries non-whitespace characters (the Messages API rejects
blank text blocks); a block with nothing to cite is not emitted.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.utils.text import slugify

from citations.accounts import account_ref_from_row
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


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One `search_result` block and the target of its source (SPEC section 4).

    `source` and `title` are what the model's citations echo back. `texts` is a
    non-empty sequence of non-blank strings (one Anthropic text block each;
    for SQL a lazy `RowTexts`). `target` is the source's target, or `None`
    when the source is untyped. `to_block()` leaves the target out: the model
    never sees it.
    """

    source: str
    title: str
    texts: Sequence[str]
    target: CitationTarget | None = None

    def to_block(self) -> dict[str, Any]:
        """The Anthropic `search_result` content block (a new dict)."""
        return {
            "type": "search_result",
            "source": self.source,
            "title": self.title,
            "content": [{"type": "text", "text": text} for text in self.texts],
            "citations": {"enabled": True},
        }


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
    """A cell as text: strings as-is, JSON spellings for null/bools, numbers as Python prints them."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        if math.isfinite(value):
            return repr(value)
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # over Python's int-to-str digit limit
            return hex(value)
    return _json_text(value)


# --------------------------------------------------------------------------
# execute_sql


def render_sql_row(row: object, columns: Sequence[str] | None = None) -> str:
    """One SQL row as text: `"col: value; col: value"` (SPEC section 4, our format).

    Column order: `columns` first (names the row lacks are skipped), then the
    row's other keys in row order. Values as `_value_text`. A row that is not
    an object is shown as its value alone. Never raises.
    """
    if not isinstance(row, dict):
        return _value_text(row)
    if columns:
        keys = [c for c in columns if c in row]
        if len(keys) != len(row):
            listed = set(keys)
            keys.extend(k for k in row if k not in listed)
        items: Any = ((k, row[k]) for k in keys)
    else:
        items = row.items()
    # Strings (most cells) skip the function call.
    return "; ".join(
        [f"{k}: {v}" if type(v) is str else f"{k}: {_value_text(v)}" for k, v in items]
    )


class RowTexts(Sequence[str]):
    """The texts of a SQL block: one per row, rendered on first use.

    Behaves as an immutable sequence of non-blank strings (rows that render
    blank are dropped; if none is left, `fallback` is the only text).
    Compares equal to any sequence with the same strings.
    """

    __slots__ = ("_columns", "_fallback", "_rows", "_texts")

    def __init__(self, rows: list[object], columns: Sequence[str] | None, fallback: str) -> None:
        self._rows: list[object] | None = rows
        self._columns = columns
        self._fallback = fallback
        self._texts: tuple[str, ...] | None = None

    def _materialise(self) -> tuple[str, ...]:
        texts = self._texts
        if texts is None:
            rows, columns = self._rows or [], self._columns
            texts = tuple(
                text for text in (render_sql_row(row, columns) for row in rows) if not _is_blank(text)
            ) or (self._fallback,)
            self._texts, self._rows = texts, None  # drop the rows once rendered
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
    """Rows behind one block, and the accounts they name so far."""

    __slots__ = ("rows", "title", "typed", "refs", "seen")

    def __init__(self, title: str, typed: bool) -> None:
        self.rows: list[object] = []
        self.title = title
        # False once a row names no account (or for the portfolio block).
        self.typed = typed
        self.refs: dict[str, AccountRef] = {}
        # (source_account_id, source) pairs already merged: a repeated account
        # costs one set lookup instead of a regex match.
        self.seen: set[tuple[str, object]] = set()


def _sql_columns(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    seen: dict[str, None] = {}
    for name in value:
        if isinstance(name, str):
            seen.setdefault(name, None)
    return tuple(seen) or None


def _label_column(rows: list[object]) -> str | None:
    """The first of `LABEL_COLUMNS` that is a key of any row (one pass)."""
    best: int | None = None
    for row in rows:
        if isinstance(row, dict):
            for index, column in enumerate(LABEL_COLUMNS):
                if best is not None and index >= best:
                    break
                if column in row:
                    best = index
                    break
            if best == 0:
                break
    return None if best is None else LABEL_COLUMNS[best]


def _label_text(value: object) -> str | None:
    """The label as shown, or `None` when null or blank (those rows go to the portfolio)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else _value_text_for_label(value)
    return None if text.isspace() or not text else text


def _value_text_for_label(value: object) -> str:
    # SPEC: a non-string label is compared and shown as `str(value)`.
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - huge ints, hostile objects
        return _value_text(value)


def _merge_row_account(group: _SqlGroup, row: dict[str, object]) -> None:
    """Fold one row's account into its group, or untype the group (SPEC section 4)."""
    sid = row.get("source_account_id")
    if type(sid) is str:
        source = row.get("source")
        try:
            key = (sid, source)
            if key in group.seen:
                return
        except TypeError:  # unhashable `source`: decide the slow way
            key = None
    else:
        key = None
    ref = account_ref_from_row(row)
    if ref is None:
        group.typed = False
        group.refs.clear()
        group.seen.clear()
        return
    if key is not None and ref.account_id == sid:
        # Step 1 decided: the result depends on (sid, source) alone. (A
        # fallback column can never yield `sid`, which was not a valid id.)
        group.seen.add(key)
    known = group.refs.get(ref.account_id)
    if known is None or (known.provider is None and ref.provider is not None):
        group.refs[ref.account_id] = ref


def _group_target(group: _SqlGroup) -> CitationTarget | None:
    if not group.typed or not group.refs:
        return None
    refs = tuple(group.refs.values())
    if len(refs) == 1:
        return AccountTarget(refs[0].account_id, refs[0].provider)
    return AccountsTarget(refs)


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

    groups: dict[str, _SqlGroup] = {}  # source -> group, in first-seen order
    by_label: dict[str, _SqlGroup] = {}  # label text -> group (slugify once per label)
    portfolio: _SqlGroup | None = None
    for row in rows:
        label = row.get(label_column) if type(row) is dict else None
        group = by_label.get(label) if type(label) is str else None
        if group is None:
            # First sight of this label (or a null / non-string one).
            text = _label_text(label)
            if text is None:
                if portfolio is None:
                    portfolio = groups[PORTFOLIO_SOURCE] = _SqlGroup(PORTFOLIO_TITLE, False)
                group = portfolio
            else:
                group = by_label.get(text)
                if group is None:
                    source = ACCOUNT_SOURCE_PREFIX + (slugify(text) or "account")
                    group = groups.get(source)
                    if group is None:
                        group = groups[source] = _SqlGroup(text, True)
                    by_label[text] = group
            if type(label) is str:
                by_label[label] = group  # blank labels too: they map to the portfolio
        group.rows.append(row)
        if group.typed:
            _merge_row_account(group, row)  # type: ignore[arg-type]

    results = []
    for source, group in groups.items():
        target = _PORTFOLIO if group is portfolio else _group_target(group)
        # Labelled rows always render non-blank ("account_name: ..."), so the
        # fallback only guards the invariant.
        texts = RowTexts(group.rows, columns, EMPTY_ROWS_TEXT)
        results.append(SearchResult(source, group.title, texts, target))
    return results


# --------------------------------------------------------------------------
# execute_python


class _StrictJSONError(ValueError):
    pass


def _reject_constant(name: str) -> object:
    # json.loads accepts NaN/Infinity/-Infinity; RFC 8259 does not.
    raise _StrictJSONError(name)


def _parse_document(text: str) -> object | None:
    """`text` as a strict-JSON object or list, else `None`."""
    stripped = text.strip()
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
        return [(document, stdout.strip())]
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
        pieces.append((document, line.strip()))
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
