"""The reads every API request makes, as one SQL statement each on PostgreSQL (docs/decisions.md#hot-reads).

Compiling a queryset costs more than running these small indexed queries:
0.25 ms for the token's user, 1.8 ms for a session's head (its row, its
turns' count and latest time: three subqueries), 0.5 ms for the rows of a
detail, 0.8 ms for a page of the list, on the machines of bench/README.md ("hot reads"), which put a 304
at six times its floor. So on PostgreSQL each is written once here, from
the models' own table and column names, and run on a cursor (rows made
models by `Model.from_db`); on SQLite (one process, a laptop) `chat.selectors`, the one way in, runs
the querysets instead (`available()`). This module imports nothing of `chat.selectors`.
`tests/chat/test_hot_reads.py` holds each statement to its queryset on any rows (a hypothesis property).

Raw: bench/orm_vs_raw.py, "hot reads".

With a read replica (`chat.replica`): the one-row reads stay on the primary (the token's user, with the
user's write count; a session's head; the count of a user's sessions), which is all a 304 or an empty list
reads: a second database would add a round trip worth 10-20% of such a request (bench/README.md, "Reads
on a replica"). The bodies (a page of sessions, a session's turns) go where the router sends a read: the
replica, when it has the caller's writes.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, connections, router
from django.db.models import Field, JSONField, Model

from chat.models import ChatLog, ChatSession, UserWriteMark
from chat.replica import remember_write_count

__all__ = ["SESSION_ORDER", "session_count", "session_head", "session_page", "session_rows", "token_user"]

#: Most recently active first; the index `chat_sessions_user_order` serves it.
SESSION_ORDER = ("-updated_at", "-created_at", "-id")


def available() -> bool:
    """Whether these statements serve the reads: on PostgreSQL. Elsewhere `chat.selectors` runs the
    querysets they are held to (SQLite's raw rows would need the conversions a queryset makes)."""
    return connection.vendor == "postgresql"


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


@functools.cache
def _token_user_sql() -> tuple[list[str], str]:
    from rest_framework.authtoken.models import Token

    user_model = get_user_model()
    names, columns = _columns(user_model, "u")
    marks, user_id = _q(UserWriteMark._meta.db_table), _q("user_id")
    sql = (
        f"SELECT {columns}, COALESCE(m.{_q('seq')}, 0) FROM {_q(user_model._meta.db_table)} u "  # noqa: S608
        f"JOIN {_q(Token._meta.db_table)} t ON t.{user_id} = u.{_q('id')} "
        f"LEFT JOIN {marks} m ON m.{user_id} = u.{_q('id')} WHERE t.{_q('key')} = %s"
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
    """The user owning the DRF token `key` (DRF's `Token.user`), or None. One query, on the primary, which
    also reads the user's write count for the read replica's choice (`chat.replica`)."""
    user_model = get_user_model()
    if not available():
        return user_model._default_manager.filter(auth_token__key=key).first()
    names, sql = _token_user_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, [key])
        row = cursor.fetchone()
    if row is None:
        return None
    user = user_model.from_db(connection.alias, names, row[:-1])
    remember_write_count(user.pk, int(row[-1]))
    return user


def _reading(model: type[Model]) -> Any:
    """The connection a read of `model` goes to (the router's choice: the primary, or the read replica)."""
    return connections[router.db_for_read(model)]


@functools.cache
def _session_count_sql() -> str:
    return f"SELECT COUNT(*) FROM {_q(ChatSession._meta.db_table)} WHERE {_q('user_id')} = %s"  # noqa: S608


def session_count(user_id: Any) -> int:
    """How many sessions the user has (`chat_sessions` and its user index alone). One query; PostgreSQL."""
    sql = _session_count_sql()
    with connection.cursor() as cursor:  # the primary: one index lookup
        cursor.execute(sql, [user_id])
        return int(cursor.fetchone()[0])


@functools.cache
def _session_page_sql(fields: tuple[str, ...]) -> str:
    # The page first (the user's index entries alone), then its turns counted for its rows only: never
    # for the rows an offset skips.
    logs, sessions = _q(ChatLog._meta.db_table), _q(ChatSession._meta.db_table)
    count = f"(SELECT COUNT(*) FROM {logs} l WHERE l.{_q('session_id')} = s.{_q('id')})"  # noqa: S608
    columns = ", ".join(count if name == "message_count" else f"s.{_q(name)}" for name in fields)
    order = ", ".join(f"s.{_q(name.lstrip('-'))} {'DESC' if name.startswith('-') else 'ASC'}" for name in SESSION_ORDER)
    page = f"SELECT * FROM {sessions} s WHERE s.{_q('user_id')} = %s ORDER BY {order} LIMIT %s OFFSET %s"  # noqa: S608
    return f"SELECT {columns} FROM ({page}) s ORDER BY {order}"  # noqa: S608


def session_page(user_id: Any, bottom: int, top: int, fields: Sequence[str]) -> list[tuple[Any, ...]]:
    """Rows `bottom` to `top` (exclusive) of the user's sessions, most recently active first, as tuples of
    `fields` (`ChatSession` columns and `message_count`, its turns counted for these rows only). One query;
    PostgreSQL."""
    with _reading(ChatSession).cursor() as cursor:
        cursor.execute(_session_page_sql(tuple(fields)), [user_id, top - bottom, bottom])
        return cursor.fetchall()


def session_head(session_id: uuid.UUID, user_id: Any) -> tuple[ChatSession, int, Any] | None:
    """The user's session `session_id`, its turns' count and their latest `created_at`; None when it is not
    the user's. One query; PostgreSQL."""
    names, sql = _session_head_sql()
    with connection.cursor() as cursor:  # the primary: one row, and what a 304 needs
        cursor.execute(sql, [session_id, user_id])
        row = cursor.fetchone()
    if row is None:
        return None
    return ChatSession.from_db(connection.alias, names, row[:-2]), int(row[-2]), row[-1]


def session_rows(session_id: uuid.UUID, fields: Sequence[str]) -> list[tuple[Any, ...]]:
    """The session's turns, oldest first, as tuples of the `ChatLog` columns `fields`, JSON columns as their
    stored text (`chat.selectors.session_message_rows` without `after`). One query; PostgreSQL."""
    sql = _session_rows_sql(tuple(fields))
    with _reading(ChatLog).cursor() as cursor:
        cursor.execute(sql, [session_id])
        return cursor.fetchall()
