"""The chat admin's citation tables, from stored JSON values (issue #3; docs/admin.md#a-log, docs/turns.md).

Python decides what each cell says; the templates under
`templates/admin/chat/chatlog/display/` write the HTML. Each public function
reads one stored value into a small frozen view (plain strings, numbers and
states, no markup) and renders its template, which returns a `SafeString`.
The templates run with autoescape on, so every piece of data is escaped as
`format_html` would; nothing here or there marks data safe. No ORM, no
request: each function is tested on its own. Nothing here raises on any JSON
value: a stored row is shown as it is, odd parts labelled, never hidden.

Staff pages only: the account `provider` is shown here (docs/privacy.md
keeps it from end users, not from staff).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from citations.summary import MALFORMED, UNTYPED, classify_citation
from citations.support import PARTLY_SUPPORTED, SUPPORTED, UNCHECKED, UNSUPPORTED, CitationSupport, read_support
from citations.targets import AccountsTarget, AccountTarget, MarketDataTarget
from citations.utf16 import utf16_length, utf16_slice, utf16_splits_character

__all__ = [
    "FOLD_AT",
    "FOLD_PREVIEW",
    "citation_state",
    "citations_table",
    "folded_text",
    "inline_citations_table",
    "kind_badge",
    "pretty_json",
    "safe_link",
    "span_cell",
    "support_cell",
    "target_details",
]

#: Cited texts and spans longer than this (characters) are folded into <details>.
FOLD_AT = 160
#: Characters of a folded text shown in its <summary>.
FOLD_PREVIEW = 80

_TEMPLATES = "admin/chat/chatlog/display/"

# Badge colours: constants, so the inline styles carry no data.
_BADGE_COLOURS: dict[str, str] = {
    "web": "#1d4ed8",
    "tax_reference": "#7c3aed",
    "card_document": "#9333ea",
    "mortgage_reference": "#6d28d9",
    "market_data": "#0f766e",
    "analysis": "#4d7c0f",
    "account": "#b45309",
    "accounts": "#c2410c",
    "portfolio": "#047857",
    UNTYPED: "#6b7280",
    MALFORMED: "#b91c1c",
}
_SUPPORT_COLOURS: dict[str, str] = {
    SUPPORTED: "#047857",
    PARTLY_SUPPORTED: "#b45309",
    UNSUPPORTED: "#b91c1c",
    UNCHECKED: "#6b7280",
}
_SUPPORT_LABELS: dict[str, str] = {
    SUPPORTED: "supported",
    PARTLY_SUPPORTED: "partly supported",
    UNSUPPORTED: "unsupported",
    UNCHECKED: "unchecked",
}
# A link is made only for an absolute http(s) URL; `javascript:`, `data:` and
# anything else stays text (issue #3, item 5).
_HTTP_URL = re.compile(r"https?://\S+", re.IGNORECASE)

citation_state = classify_citation  # one rule for the tables, the counts and the filters


def _render(name: str, **context: Any) -> SafeString:
    return render_to_string(f"{_TEMPLATES}{name}", context)


def _compact_json(value: Any) -> str:
    """One-line JSON of any stored value (non-JSON leftovers shown with `str`)."""
    return json.dumps(value, ensure_ascii=False, default=str)


# -- the views: what a template shows, no markup ------------------------------------


@dataclass(frozen=True, slots=True)
class Badge:
    """A target kind, `untyped` or `malformed`, with its colour."""

    kind: str
    colour: str


@dataclass(frozen=True, slots=True)
class TextView:
    """A stored text value: absent (`none`), not a string (`json`: its JSON in
    `text`), shown whole (`short`) or folded after `preview` (`folded`, with
    its `length` in characters)."""

    shape: Literal["none", "json", "short", "folded"]
    text: str = ""
    preview: str = ""
    length: int = 0


@dataclass(frozen=True, slots=True)
class LinkView:
    """A URL value: absent (`none`), not a string (`json`), an http(s) link (`link`), else text (`code`)."""

    shape: Literal["none", "json", "link", "code"]
    text: str = ""


@dataclass(frozen=True, slots=True)
class AccountView:
    account_id: str
    provider: str | None  # None: shown as "unknown"


@dataclass(frozen=True, slots=True)
class TargetView:
    """One citation's target, its `kind` as `classify_citation` says, shown as:
    `untyped`; `unreadable` (a `note` and the stored `raw_json`); `account` or
    `accounts` (`accounts`); `ticker`; `url` (`link`, None for a corpus
    document); `none` (the kind says it all)."""

    kind: str
    shape: Literal["untyped", "unreadable", "account", "accounts", "ticker", "url", "none"]
    note: str = ""
    raw_json: str = ""
    accounts: tuple[AccountView, ...] = ()
    ticker: str = ""
    link: LinkView | None = None


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of a span's text; `marked` when it is a figure the source does not hold (SPEC 15)."""

    text: str
    marked: bool


@dataclass(frozen=True, slots=True)
class SpanView:
    """An inline citation's span: its bounds as stored (JSON), the answer text
    it covers (None when it covers none), and a `note` for what is odd.
    `bounds` False: the entry is no object, so it has no span at all.
    `pieces`: the covered text cut around the figures its support lists as
    not found (shown whole, those marked); empty when none is listed."""

    bounds: bool
    start: str = ""
    end: str = ""
    covered: TextView | None = None
    note: str = ""
    pieces: tuple[Piece, ...] = ()


@dataclass(frozen=True, slots=True)
class SupportView:
    """An inline citation's support (SPEC 15, docs/support.md): its `status` as `support_status` reads it,
    a `label` and `colour`, the figures not found (`unmatched`, their texts), the `digest` (None: none), and
    a `note` when the stored value is missing or cannot be read (then `unchecked`)."""

    status: str
    label: str
    colour: str
    unmatched: tuple[str, ...] = ()
    digest: str | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class RowView:
    """One line of a citation table; `span` and `support` only in the inline table."""

    number: int
    badge: Badge
    span: SpanView | None
    target: TargetView
    source: str | None  # the source, or its JSON when it is no string; None: no source
    title: TextView | None  # None: no title
    cited_text: TextView
    support: SupportView | None = None


def _badge(kind: str) -> Badge:
    return Badge(kind, _BADGE_COLOURS.get(kind, _BADGE_COLOURS[MALFORMED]))


def _link(url: Any) -> LinkView:
    if not isinstance(url, str):
        return LinkView("none") if url is None else LinkView("json", _compact_json(url))
    return LinkView("link" if _HTTP_URL.fullmatch(url) else "code", url)


def _text(text: Any) -> TextView:
    if text is None:
        return TextView("none")
    if not isinstance(text, str):
        return TextView("json", _compact_json(text))
    if len(text) <= FOLD_AT:
        return TextView("short", text)
    return TextView("folded", text, text[:FOLD_PREVIEW], len(text))


def _target(entry: Any) -> TargetView:
    kind, target = citation_state(entry)
    if kind == UNTYPED:
        return TargetView(kind, "untyped")
    if target is None:
        raw = entry.get("target") if isinstance(entry, dict) else entry
        note = "not a citation object" if not isinstance(entry, dict) else "target cannot be read"
        return TargetView(kind, "unreadable", note=note, raw_json=_compact_json(raw))
    if isinstance(target, AccountTarget):
        return TargetView(kind, "account", accounts=(AccountView(target.account_id, target.provider),))
    if isinstance(target, AccountsTarget):
        return TargetView(
            kind, "accounts", accounts=tuple(AccountView(r.account_id, r.provider) for r in target.accounts)
        )
    if isinstance(target, MarketDataTarget):
        return TargetView(kind, "ticker", ticker=target.ticker)
    if hasattr(target, "url"):  # web and the three library kinds
        return TargetView(kind, "url", link=_link(target.url) if target.url is not None else None)
    return TargetView(kind, "none")  # analysis, portfolio


def _is_offset(value: Any) -> bool:
    # `bool` is an `int` subclass; `true` is not an offset.
    return isinstance(value, int) and not isinstance(value, bool)


def _support(entry: Any) -> tuple[SupportView, CitationSupport | None]:
    value = entry.get("support") if isinstance(entry, dict) else None
    support = read_support(value)
    if support is None:
        note = "" if not isinstance(entry, dict) else "no support" if "support" not in entry else "cannot be read"
        view = SupportView(UNCHECKED, _SUPPORT_LABELS[UNCHECKED], _SUPPORT_COLOURS[UNCHECKED], note=note)
        return view, None
    view = SupportView(
        support.status,
        _SUPPORT_LABELS[support.status],
        _SUPPORT_COLOURS[support.status],
        unmatched=tuple(figure.text for figure in support.unmatched),
        digest=support.digest,
    )
    return view, support


def _pieces(answer: str, start: int, end: int, support: CitationSupport | None) -> tuple[tuple[Piece, ...], bool]:
    """The span `answer[start:end]` (UTF-16) cut around each unmatched figure inside it, in order; and whether
    a figure lay outside the span (or overlapped the one before), which is then left unmarked."""
    if support is None or not support.unmatched:
        return (), False
    pieces, at, stray = [], start, False
    for figure in support.unmatched:
        if not start <= at <= figure.start <= figure.end <= end:
            stray = True
            continue
        before, text = utf16_slice(answer, at, figure.start), utf16_slice(answer, figure.start, figure.end)
        if before is None or text is None:
            stray = True
            continue
        pieces += [Piece(before, False), Piece(text, True)]
        at = figure.end
    rest = utf16_slice(answer, at, end)
    pieces.append(Piece(rest or "", False))
    return tuple(piece for piece in pieces if piece.text), stray


def _span(answer: Any, start: Any, end: Any, support: CitationSupport | None = None) -> SpanView:
    covered: str | None = None
    if not (_is_offset(start) and _is_offset(end)):
        note = "offsets missing or not integers"
    elif not isinstance(answer, str):
        note = "no answer text"
    elif (covered := utf16_slice(answer, start, end)) is None:
        note = f"out of range (answer is {utf16_length(answer)} UTF-16 units)"
    elif covered == "":
        note = "empty span"
    elif utf16_splits_character(answer, start) or utf16_splits_character(answer, end):
        note = "a bound splits a character"
    else:
        note = ""
    pieces: tuple[Piece, ...] = ()
    if covered and isinstance(answer, str):
        pieces, stray = _pieces(answer, start, end, support)
        if stray:
            note = (note + "; " if note else "") + "a figure not found lies outside the span"
    return SpanView(
        True,
        _compact_json(start),
        _compact_json(end),
        covered=_text(covered) if covered else None,
        note=note,
        pieces=pieces,
    )


def _cell(entry: Any, key: str) -> Any:
    return entry.get(key) if isinstance(entry, dict) else None


def _row(number: int, entry: Any, span: SpanView | None, support: SupportView | None = None) -> RowView:
    source, title = _cell(entry, "source"), _cell(entry, "title")
    target = _target(entry)
    return RowView(
        support=support,
        number=number,
        badge=_badge(target.kind),
        span=span,
        target=target,
        source=source if source is None or isinstance(source, str) else _compact_json(source),
        title=None if title is None else _text(title),
        cited_text=_text(_cell(entry, "cited_text")),
    )


def _not_a_list(column: Any) -> str | None:
    """A note for a column that is not a list (null, an object, a string...), else None."""
    if isinstance(column, list):
        return None
    if column is None:
        what = "null"
    elif isinstance(column, dict):
        what = "an object"
    elif isinstance(column, str):
        what = "a string"
    else:
        what = type(column).__name__
    return f"stored value is {what}, not a list:"


_LABELS = ("#", "kind", "target", "source", "title", "cited text")


def _table(column: Any, labels: Sequence[str], rows: Sequence[RowView], empty: str) -> SafeString:
    odd = _not_a_list(column)
    odd_json = _compact_json(column) if odd else ""
    return _render("table.html", odd=odd, odd_json=odd_json, labels=labels, rows=rows, empty=empty)


# -- the public builders -----------------------------------------------------------


def kind_badge(kind: str) -> SafeString:
    """A coloured label for a target kind, `untyped` or `malformed`."""
    return _render("badge.html", badge=_badge(kind))


def safe_link(url: Any) -> SafeString:
    """`url` as a link when it is an absolute http(s) URL, else as plain text."""
    return _render("link.html", link=_link(url))


def target_details(entry: Any) -> SafeString:
    """The target of one stored citation, read through `parse_citation_target`.

    Typed: its fields (account id and provider, ticker, URL as a safe link).
    Untyped: labelled so. Malformed: labelled, with the stored target JSON
    shown as text so staff see what was written.
    """
    return _render("target.html", target=_target(entry))


def folded_text(text: Any) -> SafeString:
    """Text shown whole when short, else folded in a <details> (pre-wrapped).

    A value that is not a string (null, a number) is shown as its JSON.
    """
    return _render("text.html", text=_text(text))


def support_cell(entry: Any) -> SafeString:
    """An inline citation's support (SPEC 15): its status (`unchecked`, labelled, when missing or unreadable),
    the figures the source does not hold, and the digest of the source text."""
    return _render("support.html", support=_support(entry)[0])


def span_cell(answer: Any, start: Any, end: Any) -> SafeString:
    """An inline citation's `start`–`end` and the slice of the answer it covers.

    Offsets are UTF-16 code units, end exclusive. Missing, non-integer,
    reversed and out-of-range spans are labelled, as is a bound that splits a
    surrogate pair; nothing raises.
    """
    return _render("span.html", span=_span(answer, start, end))


def citations_table(column: Any) -> SafeString:
    """The row's `citations` (docs/turns.md) as a table, one line per entry.

    A column that is not a list (null, an object, a string) is labelled and
    shown as its JSON.
    """
    rows = [_row(number, entry, None) for number, entry in enumerate(column, 1)] if isinstance(column, list) else []
    return _table(column, _LABELS, rows, "no citations")


def inline_citations_table(column: Any, answer: Any) -> SafeString:
    """The row's `inline_citations` as a table, each with the answer span it covers and its support.

    `answer` is the stored answer text the `start`/`end` UTF-16 offsets index.
    In the span, each figure the support lists as not found in the source is
    marked (docs/support.md); the cited text is in the same row.
    """
    rows = []
    for number, entry in enumerate(column if isinstance(column, list) else [], 1):
        support_view, support = _support(entry)
        if isinstance(entry, dict):
            span = _span(answer, entry.get("start"), entry.get("end"), support)
        else:
            span = SpanView(False)
        rows.append(_row(number, entry, span, support_view))
    labels = (*_LABELS[:2], "span of the answer", "support", *_LABELS[2:])
    return _table(column, labels, rows, "no inline citations")


def pretty_json(value: Any) -> SafeString:
    """`value` as indented JSON, Unicode as is, in a <pre> (escaped)."""
    return _render("json.html", text=json.dumps(value, indent=2, ensure_ascii=False, default=str))
