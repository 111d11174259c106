"""Reads on a PostgreSQL streaming replica, each user reading their own writes (docs/deploying.md#a-read-replica).

With `DATABASE_REPLICA_URL` set, the settings add the `replica` database,
`ReplicaRouter` and the middleware `replica_reads`. A `GET` or `HEAD` of the
API, the pages or the admin then reads the chat and finance tables on the
replica, unless the replica has not yet replayed the caller's own last write:
then it reads the primary. Every write, every other request (a `POST`, the
live turns' streams and their event log, LISTEN/NOTIFY), authentication and
sessions, the job engine's workers and every command stay on the primary.

Read-your-writes is exact, whatever the replica's lag: every write of a
user's chat data adds one to the user's row of `chat_user_write_marks` in the
same transaction (`note_user_writes`; `chat.imports.writer.write_turns`, the
one writer of turns, does it for imports and live turns alike). A replica
that shows the user's latest count has replayed that transaction, and every
one before it. The caller's count on the primary comes with the token lookup
(`chat.hot_reads.token_user`, no extra query) or, for a signed-in page, from
one query; the replica's count is asked only when this process has not seen
it caught up to that count yet (`_caught_up`), so a user who has not written
since costs no query at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.models import Model
from django.http import HttpRequest, HttpResponse

__all__ = ["REPLICA", "ReplicaRouter", "note_user_writes", "remember_write_count", "replica_reads"]

logger = logging.getLogger(__name__)

REPLICA = "replica"
"""The replica's alias in `settings.DATABASES`."""

#: Apps whose tables a request may read on the replica: a user's own chat and finance data.
REPLICA_APPS = frozenset({"chat", "finance"})
_MARKS = "chat_user_write_marks"
_SAFE_METHODS = frozenset({"GET", "HEAD"})
_CAUGHT_UP_USERS = 100_000  # users whose caught-up count this process keeps; past it, it starts again


@dataclass(slots=True)
class _Reads:
    """One request's reads: its user's write count on the primary once known, and the database chosen."""

    request: HttpRequest
    user_id: Any = None
    count: int | None = None
    alias: str | None = None


_reads: ContextVar[_Reads | None] = ContextVar("silvia_replica_reads", default=None)
_caught_up: dict[Any, int] = {}  # user id -> a write count the replica was seen to show
_last_warning = 0.0


def replica_reads(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """Middleware: a `GET` or `HEAD` may read on the replica (decided at its first read, `ReplicaRouter`)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        # Set for every request, so nothing of the thread's previous request is left.
        _reads.set(_Reads(request) if request.method in _SAFE_METHODS else None)
        return get_response(request)

    return middleware


def remember_write_count(user_id: Any, count: int) -> None:
    """The caller's write count on the primary, read with its token (`chat.hot_reads.token_user`)."""
    reads = _reads.get()
    if reads is not None:
        reads.user_id, reads.count = user_id, count


def note_user_writes(user_ids: Iterable[Any]) -> None:
    """Count one write of each user's chat data; call it inside the transaction that writes them.

    One statement; users in id order, so concurrent writers lock their rows in one order.
    """
    ids = sorted(set(user_ids))
    if not ids:
        return
    connection = connections[DEFAULT_DB_ALIAS]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"INSERT INTO {_MARKS} AS m (user_id, seq) SELECT unnest(%s::bigint[]), 1 "
                "ON CONFLICT (user_id) DO UPDATE SET seq = m.seq + 1",
                [ids],
            )
        else:
            cursor.executemany(
                f"INSERT INTO {_MARKS} (user_id, seq) VALUES (%s, 1) "  # noqa: S608
                "ON CONFLICT (user_id) DO UPDATE SET seq = seq + 1",
                [[user_id] for user_id in ids],
            )


def _count(alias: str, user_id: Any) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute(f"SELECT seq FROM {_MARKS} WHERE user_id = %s", [user_id])  # noqa: S608
        row = cursor.fetchone()
    return 0 if row is None else int(row[0])


def _warn(error: DatabaseError) -> None:
    global _last_warning
    if time.monotonic() - _last_warning > 60:
        _last_warning = time.monotonic()
        logger.warning("the read replica did not answer (%s): reading the primary", type(error).__name__)


def _choose(reads: _Reads) -> str | None:
    """The database for the request's reads; None while its user is not known yet (decide again later)."""
    user = getattr(reads.request, "user", None)
    if user is None or not user.is_authenticated:
        return None  # before authentication (DRF's runs in the view): nothing of anyone's to read back yet
    if reads.user_id != user.pk or reads.count is None:
        reads.user_id, reads.count = user.pk, _count(DEFAULT_DB_ALIAS, user.pk)
    count = reads.count
    if count == 0 or _caught_up.get(user.pk, -1) >= count:
        return REPLICA
    try:
        shown = _count(REPLICA, user.pk)
    except DatabaseError as error:  # down, or behind the migration that made the table
        _warn(error)
        return DEFAULT_DB_ALIAS
    if shown < count:
        return DEFAULT_DB_ALIAS  # the user's last write is not on the replica yet
    if len(_caught_up) >= _CAUGHT_UP_USERS:
        _caught_up.clear()
    _caught_up[user.pk] = shown
    return REPLICA


class ReplicaRouter:
    """Django's database router (`DATABASE_ROUTERS`) for the replica; see the module doc."""

    def db_for_read(self, model: type[Model], **hints: Any) -> str:
        reads = _reads.get()
        if reads is None or model._meta.app_label not in REPLICA_APPS:
            return DEFAULT_DB_ALIAS
        if reads.alias is None:
            chosen = _choose(reads)
            if chosen is None:
                return DEFAULT_DB_ALIAS
            reads.alias = chosen
        return reads.alias

    def db_for_write(self, model: type[Model], **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool:
        return True  # the replica is a copy of the primary: the same rows

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS  # the replica replays the primary's schema
