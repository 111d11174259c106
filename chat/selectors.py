"""Reads, always scoped to the caller (docs/privacy.md: another user's session
is indistinguishable from a missing one)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, F, JSONField, QuerySet, TextField
from django.db.models.functions import Cast

from chat.citation_queries import CitationCount
from chat.models import ChatLog, ChatSession
from citations.turn import parse_uuid


def session_list_for_user(*, user: AbstractBaseUser) -> QuerySet[ChatSession]:
    """The user's sessions, most recently active first, each with `message_count`."""
    return (
        ChatSession.objects.filter(user=user)
        .annotate(message_count=Count("logs"))
        .order_by("-updated_at", "-created_at", "-id")
    )


def session_get_for_user(*, session_id: str | uuid.UUID, user: AbstractBaseUser) -> ChatSession | None:
    """The user's session `session_id`, or None when it is missing, another
    user's, or `session_id` is not a UUID in its canonical dashed form (no
    query then). One query."""
    session_uuid = session_id if isinstance(session_id, uuid.UUID) else parse_uuid(session_id)
    if session_uuid is None:
        return None
    return ChatSession.objects.filter(pk=session_uuid, user=user).first()


def session_messages(*, session: ChatSession) -> QuerySet[ChatLog]:
    """The session's turns, oldest first. One query."""
    return ChatLog.objects.filter(session=session).order_by("created_at", "id")


def session_message_rows(*, session: ChatSession, fields: Sequence[str]) -> QuerySet[ChatLog, tuple]:
    """The session's turns, oldest first, as tuples of the `ChatLog` columns `fields`. One query.

    JSON columns come back as their stored JSON text, not decoded: jsonb's
    text output on PostgreSQL (keys in jsonb order), the text Django wrote on
    SQLite (keys in written order). Either is valid JSON with the value a
    decoded read would give, so a response can embed it as it is.
    """
    columns = [
        Cast(name, TextField()) if isinstance(ChatLog._meta.get_field(name), JSONField) else name for name in fields
    ]
    return ChatLog.objects.filter(session=session).order_by("created_at", "id").values_list(*columns)


def chat_logs_with_citation_counts(queryset: QuerySet[ChatLog] | None = None) -> QuerySet[ChatLog]:
    """`queryset` (default: every log) annotated with counts over `citations`, computed by the database.

    `citation_total` (entries), `typed_total`, `untyped_total` and
    `malformed_total` (`citations.summary.classify_citation`'s states; they
    add up to `citation_total`). Staff-only: no user scoping here.
    """
    queryset = ChatLog.objects.all() if queryset is None else queryset
    return queryset.annotate(
        citation_total=CitationCount("citations"),
        typed_total=CitationCount("citations", "typed"),
        untyped_total=CitationCount("citations", "untyped"),
    ).annotate(malformed_total=F("citation_total") - F("typed_total") - F("untyped_total"))
