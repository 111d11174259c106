"""The reads every API request makes, as one SQL statement each on PostgreSQL (docs/decisions.md#hot-reads).

Compiling a queryset costs more than running these small indexed queries:
0.25 ms for the token's user, 1.8 ms for a session's head (its row, its
turns' count and latest time: three subqueries), 0.5 ms for the rows of a
detail, on the machines of bench/README.md ("hot reads"), which put a 304
at six times its floor. So on PostgreSQL each is written once here, from
the models' own table and column names, and run on a cursor (rows made
models by `Model.from_db`); on SQLite (one process, a laptop) they stay querysets.
`tests/test_hot_reads.py` holds each statement to its queryset on the same rows.

Raw: bench/orm_vs_raw.py, "hot reads".
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Count, Field, JSONField, Max, Model, OuterRef, Subquery
from django.db.models.functions import Coalesce

from chat.models import ChatLog, ChatSession

__all__ = ["session_count", "session_head", "session_rows", "token_user"]


def _postgresql() -> bool:
    return connection.vendor == "postgresql"


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


@functools.cache
def _token_user_sql() -> tuple[list[str], str]:
    from rest_framework.authtoken.models import Token

    user_model = get_user_model()
    names, columns = _columns(user_model, "u")
    sql = (
        f"SELECT {columns} FROM {_q(user_model._meta.db_table)} u JOIN {_q(Token._meta.db_table)} t "  # noqa: S608
        f"ON t.{_q('user_id')} = u.{_q('id')} WHERE t.{_q('key')} = %s"
    )
    return names, sql


@functools.cache
def _session_head_sql() -> tuple[list[str], str]:
    logs, session_column, created = _q(ChatLog._meta.db_table), _q("session_id"), _q("created_at")
    sessions, pk = _q(ChatSession._meta.db_table), _q("id")
    names, columns = _columns(ChatSession, "s")
    per_session = f"SELECT COUNT(*) AS n, MAX({created}) AS last FROM {logs} l WHERE l.{session_column} = s.{pk}"  # noqa: S608
    sql = (
        f"SELECT {columns}, c.n, c.last FROM {sessions} s, "  # noqa: S608
        f"LATERAL ({per_session}) c WHERE s.{pk} = %s AND s.{_q('user_id')} = %s"
    )
    return names, sql


@functools.cache
def _session_rows_sql(fields: tuple[str, ...]) -> str:
    columns = ", ".join(
        f"{_q(name)}::text" if isinstance(ChatLog._meta.get_field(name), JSONField) else _q(name) for name in fields
    )
    return (
        f"SELECT {columns} FROM {_q(ChatLog._meta.db_table)} WHERE {_q('session_id')} = %s "  # noqa: S608
        f"ORDER BY {_q('created_at')}, {_q('id')}"
    )


def _columns(model: type[Model], alias: str) -> tuple[list[str], str]:
    """The model's stored fields: their attribute names (as `Model.from_db` takes them) and their columns
    in SQL, in that order."""
    fields = [f for f in model._meta.get_fields() if isinstance(f, Field) and f.concrete and not f.many_to_many]
    return [f.attname for f in fields], ", ".join(f"{alias}.{_q(str(f.column))}" for f in fields)


def token_user(key: str) -> AbstractBaseUser | None:
    """The user owning the DRF token `key` (DRF's `Token.user`), or None. One query."""
    user_model = get_user_model()
    if not _postgresql():
        return user_model._default_manager.filter(auth_token__key=key).first()
    names, sql = _token_user_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, [key])
        row = cursor.fetchone()
    return None if row is None else user_model.from_db(connection.alias, names, row)


@functools.cache
def _session_count_sql() -> str:
    return f"SELECT COUNT(*) FROM {_q(ChatSession._meta.db_table)} WHERE {_q('user_id')} = %s"  # noqa: S608


def session_count(user_id: Any) -> int:
    """How many sessions the user has (`chat_sessions` and its user index alone). One query."""
    if not _postgresql():
        return ChatSession.objects.filter(user_id=user_id).count()
    sql = _session_count_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, [user_id])
        return int(cursor.fetchone()[0])


def session_head(session_id: uuid.UUID, user_id: Any) -> tuple[ChatSession, int, Any] | None:
    """The user's session `session_id`, its turns' count and their latest `created_at`; None when it is not
    the user's. One query."""
    if not _postgresql():
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
    names, sql = _session_head_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, [session_id, user_id])
        row = cursor.fetchone()
    if row is None:
        return None
    return ChatSession.from_db(connection.alias, names, row[:-2]), int(row[-2]), row[-1]


def session_rows(session_id: uuid.UUID, fields: Sequence[str]) -> list[tuple[Any, ...]]:
    """The session's turns, oldest first, as tuples of the `ChatLog` columns `fields`, JSON columns as their
    stored text (`chat.selectors.session_message_rows` without `after`). One query."""
    if not _postgresql():
        from chat.selectors import session_message_rows

        return list(session_message_rows(session=ChatSession(pk=session_id), fields=fields))
    sql = _session_rows_sql(tuple(fields))
    with connection.cursor() as cursor:
        cursor.execute(sql, [session_id])
        return cursor.fetchall()
