"""Taking an export back (SPEC 16, docs/running.md#importing-an-export): the stored rows, untouched.

`import_turns` reads a file record by record; a record that is an export
envelope (`{"format": "silvia-chat-export", "version": 1, "user", "session":
<the session's GET body>}`, `chat.exports`) is not a turn record: its rows are
stored as they were, `citations` and `inline_citations` exactly as exported
(targets and support included, never recomputed), the session with its own
title and times. So an export imported into an empty database gives back the
same `GET /api/chat/sessions/<id>/` body.

`parse_export` checks the whole envelope first and refuses it with the JSON
path of the first problem (`session.messages[2].citations: expected a list`);
`write_export` writes it in one transaction: a turn already stored for the same
user is skipped, a session or turn of another user refuses the whole export.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any, NoReturn

from django.db import transaction
from django.utils.dateparse import parse_datetime

from chat.exports import EXPORT_FORMAT, EXPORT_VERSION
from chat.models import ChatLog, ChatSession, PromptVersion
from citations.turn import TurnRecordError

__all__ = ["ParsedExport", "is_export", "parse_export", "write_export"]

_TEXT_FIELDS = ("user_message", "response", "model")


def is_export(record: Any) -> bool:
    """Whether a decoded record is an export envelope (it names the export format), not a turn record."""
    return isinstance(record, dict) and record.get("format") == EXPORT_FORMAT


@dataclass(frozen=True, slots=True)
class ParsedExport:
    """A checked envelope: its user's name, the session's columns, and each message's columns."""

    user: str | None
    session: dict[str, Any]
    messages: list[dict[str, Any]]


def _uuid(value: Any, path: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (TypeError, ValueError, AttributeError):
        _fail(path, "expected a UUID")


def _time(value: Any, path: str) -> dt.datetime:
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        _fail(path, "expected an ISO 8601 time with its offset")
    return parsed


def _fail(path: str, message: str) -> NoReturn:
    raise TurnRecordError(path, message)


def parse_export(record: dict[str, Any]) -> ParsedExport:
    """Check an envelope whole; `TurnRecordError` with the JSON path of the first problem."""
    if record.get("version") != EXPORT_VERSION:
        _fail("version", f"expected {EXPORT_VERSION} (this service reads version {EXPORT_VERSION} exports)")
    user = record.get("user")
    if user is not None and not isinstance(user, str):
        _fail("user", "expected a username")
    body = record.get("session")
    if not isinstance(body, dict):
        _fail("session", "expected an object")
    title = body.get("title")
    if not isinstance(title, str):
        _fail("session.title", "expected a string")
    session = {
        "id": _uuid(body.get("id"), "session.id"),
        "title": title,
        "created_at": _time(body.get("created_at"), "session.created_at"),
        "updated_at": _time(body.get("updated_at"), "session.updated_at"),
    }
    raw = body.get("messages")
    if not isinstance(raw, list):
        _fail("session.messages", "expected a list")
    messages = []
    for i, message in enumerate(raw):
        path = f"session.messages[{i}]"
        if not isinstance(message, dict):
            _fail(path, "expected an object")
        for name in _TEXT_FIELDS:
            if not isinstance(message.get(name), str):
                _fail(f"{path}.{name}", "expected a string")
        for name in ("citations", "inline_citations"):
            if not isinstance(message.get(name), list):
                _fail(f"{path}.{name}", "expected a list")
        if message.get("prompt_version") not in PromptVersion.values:
            _fail(f"{path}.prompt_version", f"expected one of {', '.join(PromptVersion.values)}")
        messages.append(
            {
                "id": _uuid(message.get("id"), f"{path}.id"),
                **{name: message[name] for name in (*_TEXT_FIELDS, "citations", "inline_citations", "prompt_version")},
                "created_at": _time(message.get("created_at"), f"{path}.created_at"),
            }
        )
    return ParsedExport(user=user, session=session, messages=messages)


def write_export(export: ParsedExport, *, owner: Any) -> tuple[list[dict[str, Any]], int]:
    """Store the envelope's session and rows for `owner`, as they are: the messages created, and how many
    were skipped.

    One transaction. A turn whose id is stored for `owner` is skipped (a
    re-import); a session or a turn of another user raises `TurnRecordError`
    and nothing is written.
    """
    session_id = export.session["id"]
    with transaction.atomic():
        stored = ChatSession.objects.filter(pk=session_id).values_list("user_id", flat=True).first()
        if stored is not None and stored != owner.pk:
            _fail("session.id", f"session {session_id} belongs to another user")
        owners = dict(ChatLog.objects.filter(pk__in=[m["id"] for m in export.messages]).values_list("pk", "user_id"))
        for i, message in enumerate(export.messages):
            if owners.get(message["id"], owner.pk) != owner.pk:
                _fail(f"session.messages[{i}].id", f"turn {message['id']} belongs to another user")
        if stored is None:
            ChatSession.objects.create(user_id=owner.pk, **export.session)
        new = [m for m in export.messages if m["id"] not in owners]
        ChatLog.objects.bulk_create(ChatLog(session_id=session_id, user_id=owner.pk, **m) for m in new)
    return new, len(export.messages) - len(new)
