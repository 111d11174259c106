"""Reads, always scoped to the caller (docs/privacy.md: another user's session
is indistinguishable from a missing one)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from django.contrib.auth.models import AbstractBaseUser
from django.db import DEFAULT_DB_ALIAS
from django.db.models import Count, F, JSONField, Max, OuterRef, Q, QuerySet, Subquery, TextField
from django.db.models.functions import Cast, Coalesce

from chat import hot_reads
from chat.citation_queries import CitationCount, SupportCounts
from chat.models import ChatLog, ChatSession
from citations.uuids import parse_uuid

SESSION_ORDER = hot_reads.SESSION_ORDER


def session_list_for_user(*, user: AbstractBaseUser) -> QuerySet[ChatSession]:
    """The user's sessions, most recently active first, from `chat_sessions` alone.

    Counting them and slicing a page read only the user's index entries,
    whatever the size of `ai_chat_logs`. `sessions_with_message_counts` adds
    `message_count` to one page.
    """
    return session_list_for_user_id(user.pk)


def session_list_for_user_id(user_id: Any) -> QuerySet[ChatSession]:
    """`session_list_for_user` by the user's id."""
    return ChatSession.objects.filter(user_id=user_id).order_by(*SESSION_ORDER)


def session_count_for_user(*, user: AbstractBaseUser) -> int:
    """`session_list_for_user(user=user).count()`: the user's index entries only (on PostgreSQL the statement
    `chat.hot_reads.session_count`). One query."""
    if hot_reads.available():
        return hot_reads.session_count(user.pk)
    return session_list_for_user(user=user).count()


@dataclass(frozen=True, slots=True)
class SessionListPages:
    """The caller's sessions as a paginator reads them: `count()` and `page(bottom, top, fields)`.

    `count()` is `session_count_for_user`; a page is
    `sessions_with_message_counts` of `session_list_for_user[bottom:top]`,
    as tuples of `fields`. Nothing is built until asked.
    """

    user: AbstractBaseUser

    def count(self) -> int:
        return session_count_for_user(user=self.user)

    def page(self, bottom: int, top: int, fields: Sequence[str]) -> list[tuple[Any, ...]]:
        if hot_reads.available():
            return hot_reads.session_page(self.user.pk, bottom, top, fields)
        page = session_list_for_user(user=self.user)[bottom:top]
        return list(sessions_with_message_counts(page=page).values_list(*fields))


def sessions_with_message_counts(*, page: QuerySet[ChatSession]) -> QuerySet[ChatSession]:
    """The sessions of `page` (a sliced `session_list_for_user`), same order, each with `message_count`.

    One query: the page is a subquery (`id IN (... LIMIT n OFFSET m)`) and
    the count a correlated subquery, so turns are counted for the page's
    rows only (an index-only count on `ai_chat_logs_session_created`), never
    for the rows an offset skips.
    """
    counts = (
        ChatLog.objects.filter(session=OuterRef("pk")).order_by().values("session").annotate(n=Count("pk")).values("n")
    )
    return (
        ChatSession.objects.filter(pk__in=page.values("pk"))
        .annotate(message_count=Coalesce(Subquery(counts), 0))
        .order_by(*SESSION_ORDER)
    )


def session_get_for_user(*, session_id: str | uuid.UUID, user: AbstractBaseUser) -> ChatSession | None:
    """The user's session `session_id`, or None when it is missing, another
    user's, or `session_id` is not a UUID in its canonical dashed form (no
    query then). One query."""
    session_uuid = session_id if isinstance(session_id, uuid.UUID) else parse_uuid(session_id)
    if session_uuid is None:
        return None
    return ChatSession.objects.filter(pk=session_uuid, user_id=user.pk).first()


def session_messages(*, session: ChatSession) -> QuerySet[ChatLog]:
    """The session's turns, oldest first. One query."""
    return ChatLog.objects.filter(session=session).order_by("created_at", "id")


class MessageCursor(NamedTuple):
    """A position in a session's turns: the (created_at, id) of one `ai_chat_logs` row, the list's order."""

    created_at: dt.datetime
    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class SessionDetail:
    """A session with what the detail's headers need (docs/api.md).

    `message_count` and `last_message_at` (the latest turn's `created_at`)
    feed the ETag; `after` is the position of the message `?after=` named,
    None when none was asked or it is not one of this session's turns.
    """

    session: ChatSession
    message_count: int
    last_message_at: dt.datetime | None
    after: MessageCursor | None


def _session_detail(session_id: uuid.UUID, user_id: Any, after: uuid.UUID) -> QuerySet[ChatSession, tuple]:
    """The session row, its turns' count and latest `created_at`, and the `created_at` of turn `after`."""
    logs = ChatLog.objects.filter(session=OuterRef("pk")).order_by().values("session")
    return (
        ChatSession.objects.filter(pk=session_id, user_id=user_id)
        .annotate(
            message_count=Coalesce(Subquery(logs.annotate(n=Count("pk")).values("n")), 0),
            last_message_at=Subquery(logs.annotate(last=Max("created_at")).values("last")),
            after_created_at=Subquery(ChatLog.objects.filter(pk=after, session=OuterRef("pk")).values("created_at")),
        )
        .values_list(*_SESSION_FIELDS, "message_count", "last_message_at", "after_created_at")
    )


_SESSION_FIELDS = tuple(field.attname for field in ChatSession._meta.concrete_fields)


def _session_head(session_id: uuid.UUID, user_id: Any) -> tuple[ChatSession, int, Any] | None:
    """The user's session, its turns' count and their latest `created_at` (`chat.hot_reads.session_head`'s
    queryset); None when it is not the user's. One query."""
    logs = ChatLog.objects.filter(session=OuterRef("pk")).order_by().values("session")
    session = (
        ChatSession.objects.filter(pk=session_id, user_id=user_id)
        .annotate(
            message_count=Coalesce(Subquery(logs.annotate(n=Count("pk")).values("n")), 0),
            last_message_at=Subquery(logs.annotate(last=Max("created_at")).values("last")),
        )
        .first()
    )
    if session is None:
        return None
    return session, session.message_count, session.last_message_at


def session_detail_for_user(
    *, session_id: str | uuid.UUID, user: AbstractBaseUser, after: uuid.UUID | None = None
) -> SessionDetail | None:
    """The user's session `session_id` with its counts (and the position of `after`), or None as
    `session_get_for_user` gives it. One query: the counts and the position are subqueries."""
    session_uuid = session_id if isinstance(session_id, uuid.UUID) else parse_uuid(session_id)
    if session_uuid is None:
        return None
    if after is None:  # every detail and 304 but `?after=`: one statement on PostgreSQL (`chat.hot_reads`)
        head = (
            hot_reads.session_head(session_uuid, user.pk)
            if hot_reads.available()
            else _session_head(session_uuid, user.pk)
        )
        if head is None:
            return None
        session, message_count, last_message_at = head
        return SessionDetail(session=session, message_count=message_count, last_message_at=last_message_at, after=None)
    row = _session_detail(session_uuid, user.pk, after).first()
    if row is None:
        return None
    width = len(_SESSION_FIELDS)
    session = ChatSession.from_db(DEFAULT_DB_ALIAS, _SESSION_FIELDS, row[:width])
    message_count, last_message_at, position = row[width:]
    return SessionDetail(
        session=session,
        message_count=message_count,
        last_message_at=last_message_at,
        after=MessageCursor(position, after) if position is not None and after is not None else None,
    )


def session_message_rows(
    *, session: ChatSession, fields: Sequence[str], after: MessageCursor | None = None
) -> QuerySet[ChatLog, tuple]:
    """The session's turns, oldest first, as tuples of the `ChatLog` columns `fields`. One query.

    With `after`, only the turns after that position (`created_at`, then id).

    JSON columns come back as their stored JSON text, not decoded: jsonb's
    text output on PostgreSQL (keys in jsonb order), the text Django wrote on
    SQLite (keys in written order). Either is valid JSON with the value a
    decoded read would give, so a response can embed it as it is.
    """
    columns = [
        Cast(name, TextField()) if isinstance(ChatLog._meta.get_field(name), JSONField) else name for name in fields
    ]
    rows = ChatLog.objects.filter(session=session)
    if after is not None:
        rows = rows.filter(Q(created_at__gt=after.created_at) | Q(created_at=after.created_at, id__gt=after.id))
    return rows.order_by("created_at", "id").values_list(*columns)


def session_message_rows_fetched(
    *, session: ChatSession, fields: Sequence[str], after: MessageCursor | None = None
) -> list[tuple[Any, ...]]:
    """`list(session_message_rows(...))`, every row at once (without `after`, on PostgreSQL the statement
    `chat.hot_reads.session_rows`). One query."""
    if after is None and hot_reads.available():
        return hot_reads.session_rows(session.pk, fields)
    return list(session_message_rows(session=session, fields=fields, after=after))


class CitationCounts(TypedDict):
    """The annotations `chat_logs_with_citation_counts` adds."""

    citation_total: int
    typed_total: int
    untyped_total: int
    malformed_total: int


class SupportCountsAnnotation(TypedDict):
    """The annotation `chat_logs_with_support_counts` adds: `{status: count}`."""

    support_counts: dict[str, int]


if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    #: A log read through `chat_logs_with_citation_counts` (for type checks only).
    ChatLogWithCounts = WithAnnotations[ChatLog, CitationCounts]
    #: A log read through `chat_logs_with_support_counts` (for type checks only).
    ChatLogWithSupportCounts = WithAnnotations[ChatLog, SupportCountsAnnotation]


def chat_logs_with_citation_counts(queryset: QuerySet[ChatLog] | None = None) -> QuerySet[ChatLogWithCounts]:
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


def chat_logs_with_support_counts(
    queryset: QuerySet[ChatLog] | None = None,
) -> QuerySet[ChatLogWithSupportCounts]:
    """`queryset` (default: every log) annotated with `support_counts`: `{status: count}` of its inline
    citations for each support status (SPEC 15; `citations.support.support_status`, a missing or malformed
    support counting as `unchecked`), computed by the database in one pass over the JSON. Staff-only: no
    user scoping here.
    """
    queryset = ChatLog.objects.all() if queryset is None else queryset
    return queryset.annotate(support_counts=SupportCounts())
