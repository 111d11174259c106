"""HTML for the chat admin's read-only log page (issue #3; docs/targets.md, docs/turns.md, docs/privacy.md).

Pure functions from stored JSON values to `SafeString`: no ORM, no request,
so each is tested on its own. Every piece of data goes through
`format_html`/`format_html_join` (escaped); `mark_safe` is used only on
constant markup. Nothing here raises on any JSON value: a stored row is
shown as it is, odd parts labelled, never hidden.

Staff pages only: the account `provider` is shown here (docs/privacy.md
keeps it from end users, not from staff).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from citations.summary import MALFORMED, UNTYPED, classify_citation
from citations.targets import (
    AccountsTarget,
    AccountTarget,
    MarketDataTarget,
)

__all__ = [
    "citation_state",
    "citations_table",
    "folded_text",
    "inline_citations_table",
    "kind_badge",
    "pretty_json",
    "safe_link",
    "span_cell",
    "target_details",
    "utf16_slice",
]

#: Cited texts and spans longer than this are folded into <details>.
FOLD_AT = 160
#: Characters of a folded text shown in its <summary>.
FOLD_PREVIEW = 80

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
_BADGE_STYLE = (
    "display:inline-block;padding:1px 6px;border-radius:8px;color:#fff;background:{};font-size:11px;white-space:nowrap"
)
_NOTE_STYLE = "color:#b91c1c;font-style:italic"
_EMPTY = mark_safe('<span style="color:#6b7280">—</span>')  # constant markup, no data
# A link is made only for an absolute http(s) URL; `javascript:`, `data:` and
# anything else stays text (issue #3, item 5).
_HTTP_URL = re.compile(r"https?://\S+", re.IGNORECASE)


def _note(text: str, *args: Any) -> SafeString:
    """A labelled oddity ("not a list", "out of range"), escaped."""
    return format_html(
        '<span class="citation-note" style="{}">{}</span>', _NOTE_STYLE, text.format(*args) if args else text
    )


def _compact_json(value: Any) -> str:
    """One-line JSON of any stored value (non-JSON leftovers shown with `str`)."""
    return json.dumps(value, ensure_ascii=False, default=str)


citation_state = classify_citation  # one rule for the tables, the counts and the filters


def kind_badge(kind: str) -> SafeString:
    """A coloured label for a target kind, `untyped` or `malformed`."""
    colour = _BADGE_COLOURS.get(kind, _BADGE_COLOURS[MALFORMED])
    return format_html(
        '<span class="citation-kind citation-kind-{}" style="{}">{}</span>',
        kind,
        format_html(_BADGE_STYLE, colour),
        kind,
    )


def safe_link(url: Any) -> SafeString:
    """`url` as a link when it is an absolute http(s) URL, else as plain text."""
    if not isinstance(url, str):
        return _EMPTY if url is None else format_html("{}", _compact_json(url))
    if _HTTP_URL.fullmatch(url):
        return format_html('<a href="{}" rel="noopener noreferrer" target="_blank">{}</a>', url, url)
    return format_html("<code>{}</code>", url)


def _field(label: str, value: Any) -> SafeString:
    return format_html("<div><strong>{}</strong>: {}</div>", label, value)


def _provider(provider: str | None) -> SafeString:
    return format_html("{}", provider) if provider is not None else format_html("<em>{}</em>", "unknown")


def target_details(entry: Any) -> SafeString:
    """The target of one stored citation, read through `parse_citation_target`.

    Typed: its fields (account id and provider, ticker, URL as a safe link).
    Untyped: labelled so. Malformed: labelled, with the stored target JSON
    shown as text so staff see what was written.
    """
    kind, target = citation_state(entry)
    if kind == UNTYPED:
        return format_html("<em>{}</em>", "no target: clients resolve it by source/title")
    if target is None:
        raw = entry.get("target") if isinstance(entry, dict) else entry
        label = "not a citation object" if not isinstance(entry, dict) else "target cannot be read"
        return format_html("{}<br><code>{}</code>", _note(label), _compact_json(raw))
    if isinstance(target, AccountTarget):
        return format_html(
            "{}{}",
            _field("account id", format_html("<code>{}</code>", target.account_id)),
            _field("provider", _provider(target.provider)),
        )
    if isinstance(target, AccountsTarget):
        rows = format_html_join(
            "",
            "<li><code>{}</code> ({})</li>",
            ((ref.account_id, _provider(ref.provider)) for ref in target.accounts),
        )
        return format_html(
            '<strong>{} accounts</strong><ol style="margin:0;padding-left:1.5em">{}</ol>', len(target.accounts), rows
        )
    if isinstance(target, MarketDataTarget):
        return _field("ticker", format_html("<code>{}</code>", target.ticker))
    if hasattr(target, "url"):  # web and the three library kinds
        url = target.url
        return _field(
            "url", safe_link(url) if url is not None else format_html("<em>{}</em>", "none (corpus document)")
        )
    return _EMPTY  # analysis, portfolio: the kind says it all


def folded_text(text: Any) -> SafeString:
    """Text shown whole when short, else folded in a <details> (pre-wrapped).

    A value that is not a string (null, a number) is shown as its JSON.
    """
    if text is None:
        return _EMPTY
    if not isinstance(text, str):
        return format_html("{} <code>{}</code>", _note("not a string:"), _compact_json(text))
    if len(text) <= FOLD_AT:
        return format_html('<span style="white-space:pre-wrap">{}</span>', text)
    return format_html(
        '<details><summary>{}… ({} characters)</summary><div style="white-space:pre-wrap">{}</div></details>',
        text[:FOLD_PREVIEW],
        len(text),
        text,
    )


def _is_offset(value: Any) -> bool:
    # `bool` is an `int` subclass; `true` is not an offset.
    return isinstance(value, int) and not isinstance(value, bool)


def _utf16_units(text: str) -> bytes:
    return text.encode("utf-16-le", errors="surrogatepass")


def _splits_pair(units: bytes, offset: int) -> bool:
    """Whether `offset` (UTF-16 units) falls between a high and a low surrogate."""
    if not 0 < offset < len(units) // 2:
        return False
    before = int.from_bytes(units[offset * 2 - 2 : offset * 2], "little")
    after = int.from_bytes(units[offset * 2 : offset * 2 + 2], "little")
    return 0xD800 <= before <= 0xDBFF and 0xDC00 <= after <= 0xDFFF


def utf16_slice(text: str, start: int, end: int) -> str | None:
    """`text[start:end]` counted in UTF-16 code units (docs/turns.md), or None.

    None when the span is not `0 <= start <= end <= length in UTF-16 units`.
    A bound inside a surrogate pair yields U+FFFD for the split half instead
    of raising.
    """
    units = _utf16_units(text)
    if not 0 <= start <= end <= len(units) // 2:
        return None
    return units[start * 2 : end * 2].decode("utf-16-le", errors="replace")


def span_cell(answer: Any, start: Any, end: Any) -> SafeString:
    """An inline citation's `start`–`end` and the slice of the answer it covers.

    Offsets are UTF-16 code units, end exclusive. Missing, non-integer,
    reversed and out-of-range spans are labelled, as is a bound that splits a
    surrogate pair; nothing raises.
    """
    bounds = format_html("<code>{}–{}</code>", _compact_json(start), _compact_json(end))
    if not (_is_offset(start) and _is_offset(end)):
        return format_html("{} {}", bounds, _note("offsets missing or not integers"))
    if not isinstance(answer, str):
        return format_html("{} {}", bounds, _note("no answer text"))
    covered = utf16_slice(answer, start, end)
    units = _utf16_units(answer)
    if covered is None:
        return format_html("{} {}", bounds, _note("out of range (answer is {} UTF-16 units)", len(units) // 2))
    if covered == "":
        return format_html("{} {}", bounds, _note("empty span"))
    shown = format_html("{}<br>“{}”", bounds, folded_text(covered))
    if _splits_pair(units, start) or _splits_pair(units, end):
        return format_html("{} {}", shown, _note("a bound splits a character"))
    return shown


def _not_a_list(column: Any) -> SafeString | None:
    """A label for a column that is not a list (null, object, string...), else None."""
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
    return format_html("{} <code>{}</code>", _note("stored value is {}, not a list:", what), _compact_json(column))


_TABLE = '<table class="citation-table" style="width:100%"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>'


def _head(labels: Sequence[str]) -> SafeString:
    return format_html_join("", "<th>{}</th>", ((label,) for label in labels))


def _cell_value(entry: Any, key: str) -> Any:
    return entry.get(key) if isinstance(entry, dict) else None


def _title(entry: Any) -> SafeString:
    title = _cell_value(entry, "title")
    if title is None:
        return format_html("<em>{}</em>", "no title")
    return folded_text(title)


def _source(entry: Any) -> SafeString:
    source = _cell_value(entry, "source")
    if not isinstance(source, str):
        return _note("no source") if source is None else format_html("<code>{}</code>", _compact_json(source))
    return format_html("<code>{}</code>", source)


def _row_cells(number: int, entry: Any) -> list[SafeString]:
    kind, _ = citation_state(entry)
    return [
        format_html("{}", number),
        kind_badge(kind),
        target_details(entry),
        _source(entry),
        _title(entry),
        folded_text(_cell_value(entry, "cited_text")),
    ]


def _table(labels: Sequence[str], rows: list[list[SafeString]], empty: str) -> SafeString:
    if not rows:
        return format_html("<em>{}</em>", empty)
    body = format_html_join(
        "",
        "<tr>{}</tr>",
        (
            (format_html_join("", '<td style="vertical-align:top">{}</td>', ((cell,) for cell in cells)),)
            for cells in rows
        ),
    )
    return format_html(_TABLE, _head(labels), body)


_LABELS = ("#", "kind", "target", "source", "title", "cited text")


def citations_table(column: Any) -> SafeString:
    """The row's `citations` (docs/turns.md) as a table, one line per entry.

    A column that is not a list (null, an object, a string) is labelled and
    shown as its JSON.
    """
    odd = _not_a_list(column)
    if odd is not None:
        return odd
    return _table(_LABELS, [_row_cells(number, entry) for number, entry in enumerate(column, 1)], "no citations")


def inline_citations_table(column: Any, answer: Any) -> SafeString:
    """The row's `inline_citations` as a table, each with the answer span it covers.

    `answer` is the stored answer text the `start`/`end` UTF-16 offsets index.
    """
    odd = _not_a_list(column)
    if odd is not None:
        return odd
    rows = []
    for number, entry in enumerate(column, 1):
        cells = _row_cells(number, entry)
        span = span_cell(answer, entry.get("start"), entry.get("end")) if isinstance(entry, dict) else _note("no span")
        rows.append([*cells[:2], span, *cells[2:]])
    labels = (*_LABELS[:2], "span of the answer", *_LABELS[2:])
    return _table(labels, rows, "no inline citations")


def pretty_json(value: Any) -> SafeString:
    """`value` as indented JSON, Unicode as is, in a <pre> (escaped)."""
    return format_html(
        '<pre style="white-space:pre-wrap;max-height:40em;overflow:auto">{}</pre>',
        json.dumps(value, indent=2, ensure_ascii=False, default=str),
    )
