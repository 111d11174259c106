"""Exporting a session (SPEC 16, docs/api.md#exporting-a-session): as stored (`json`), or for a person (`md`).

- `json`: the session exactly as `GET /api/chat/sessions/<id>/` returns it,
  inside an envelope of its own, `{"format": "silvia-chat-export", "version":
  1, "user", "session": <the GET body>}`. A turn record (docs/turns.md) cannot
  carry a stored row: its targets and support are computed from tool outputs
  that a row does not keep. `import_turns` takes the envelope back and stores
  the rows untouched (`chat.imports.envelope`), so an export imported into an
  empty database gives the same GET body.
- `md`: each question and answer, the answer as the model wrote it (Markdown)
  with a footnote marker after each cited span, and one footnote per inline
  citation, resolved for a person: the account's name from the caller's own
  accounts, a document's title and URL, a ticker, "Your portfolio", the
  cited text, and the support status when the citation has one (SPEC 15).
  Never `provider`, never an account id. The turn's time in UTC.

Both are pure functions of what is stored (and the caller's account names), so
the same session exports the same bytes.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from chat.models import ChatLog, ChatSession
from citations.targets import (
    AccountsTarget,
    AccountTarget,
    AnalysisTarget,
    CardDocumentTarget,
    MarketDataTarget,
    MortgageReferenceTarget,
    PortfolioTarget,
    TaxReferenceTarget,
    WebTarget,
    parse_citation_target,
)
from citations.utf16 import utf16_index
from finance.selectors import account_target_id, accounts_for_user

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "FORMATS",
    "account_names_for_user",
    "export_envelope_head",
    "session_markdown",
]

EXPORT_FORMAT = "silvia-chat-export"
EXPORT_VERSION = 1
FORMATS = ("json", "md")
SUPPORT_STATUSES = ("supported", "partly_supported", "unsupported", "unchecked")


def account_names_for_user(*, user: Any) -> dict[str, str]:
    """The caller's account ids, as a target carries them, to each account's readable name. One query."""
    names = {}
    for account in accounts_for_user(user=user):
        target_id = account_target_id(account)
        if target_id is not None:
            names[target_id] = account.label
    return names


def export_envelope_head(*, username: str) -> bytes:
    """The envelope's bytes before the session's GET body (which is followed by `}`)."""
    head = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "user": username}
    return orjson.dumps(head)[:-1] + b',"session":'


def _line(value: object) -> str:
    """One line of text: whitespace runs (newlines included) become one space."""
    return " ".join(str(value).split())


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>#|])")


def _plain(value: object) -> str:
    """Text shown as written inside Markdown: its markup characters escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", _line(value))


def _http(url: object) -> str | None:
    if isinstance(url, str) and url.startswith(("https://", "http://")) and not re.search(r"[\s<>]", url):
        return url
    return None


def _link(label: str, url: str | None) -> str:
    return f"[{_plain(label)}](<{url}>)" if url else _plain(label)


def citation_label(citation: Mapping[str, Any], account_names: Mapping[str, str]) -> str:
    """What a citation points at, in words (Markdown), from its target read with `parse_citation_target`."""
    source, title = citation.get("source"), citation.get("title")
    name = title if isinstance(title, str) and title.strip() else source if isinstance(source, str) else "a source"
    target = parse_citation_target(citation.get("target"))
    if isinstance(target, AccountTarget):
        return "Account: " + _plain(account_names.get(target.account_id, name))
    if isinstance(target, AccountsTarget):
        names = [account_names.get(ref.account_id) for ref in target.accounts]
        known = [_plain(n) for n in names if n]
        label = f"{len(target.accounts)} accounts"
        return label + (": " + ", ".join(known) if known else f" ({_plain(name)})")
    if isinstance(target, PortfolioTarget):
        return "Your portfolio"
    if isinstance(target, MarketDataTarget):
        return "Market data: " + _plain(target.ticker)
    if isinstance(target, AnalysisTarget):
        return "Live data" if source == "silvia://market-data/finnhub" else "Analysis"
    if isinstance(target, WebTarget | TaxReferenceTarget | CardDocumentTarget | MortgageReferenceTarget):
        return _link(name, _http(target.url))
    return _link(name, _http(source))


def _footnote(number: int, citation: Mapping[str, Any], account_names: Mapping[str, str]) -> str:
    parts = [citation_label(citation, account_names)]
    cited = citation.get("cited_text")
    if isinstance(cited, str) and cited.strip():
        parts.append(f"“{_plain(cited)}”")
    support = citation.get("support")
    status = support.get("status") if isinstance(support, dict) else None
    if status in SUPPORT_STATUSES:
        parts.append(f"Support: {str(status).replace('_', ' ')}.")
    return f"[^{number}]: " + " — ".join(parts)


def _answer_with_markers(answer: str, inline: object, first: int) -> tuple[str, list[tuple[int, Any]]]:
    """The answer with `[^n]` after each citation's span (numbered from `first`, in stored order); a citation
    whose span cannot be placed gets its marker at the end. Returns the text and `(n, citation)` pairs."""
    citations = [c for c in inline if isinstance(c, dict)] if isinstance(inline, list) else []
    index = utf16_index(answer)
    placed: list[tuple[int, int]] = []  # (str index, n)
    notes = []
    for n, citation in enumerate(citations, first):
        start, end = citation.get("start"), citation.get("end")
        at = index(end) if isinstance(end, int) and isinstance(start, int) and 0 <= start <= end else None
        placed.append((len(answer) if at is None else at, n))
        notes.append((n, citation))
    text, last = [], 0
    for at, n in sorted(placed, key=lambda item: item[0]):
        text += [answer[last:at], f"[^{n}]"]
        last = at
    text.append(answer[last:])
    return "".join(text), notes


def session_markdown(
    *, session: ChatSession, logs: Iterator[ChatLog], account_names: Mapping[str, str]
) -> Iterator[str]:
    """The session as Markdown, in pieces (one per turn): title, then each question, its time, the answer with
    footnote markers and its footnotes. `logs` oldest first; `account_names` the caller's (id -> name)."""
    yield f"# {_plain(session.title or 'Conversation')}\n\nExported from Silvia. Conversation {session.id}.\n"
    number = 1
    for turn, log in enumerate(logs, 1):
        answer, notes = _answer_with_markers(log.response, log.inline_citations, number)
        number += len(notes)
        question = "\n".join("> " + line if line else ">" for line in log.user_message.splitlines() or [""])
        when = f"{log.created_at.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC"
        piece = f"\n## Question {turn}\n\n*{when}*\n\n{question}\n\n### Answer\n\n"
        piece += answer.rstrip("\n") + "\n"
        if notes:
            piece += "\n" + "\n".join(_footnote(n, citation, account_names) for n, citation in notes) + "\n"
        yield piece
