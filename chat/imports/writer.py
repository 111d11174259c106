"""Writing a batch of assembled turns in a few statements, per database vendor (docs/turns.md).

`write_turns(rows)` runs inside the caller's transaction and returns, per
row, whether it was created, skipped (its id was stored for the same user)
or refused (its id or its session belongs to another user). In order:

1. the turns, `INSERT ... ON CONFLICT (id) DO NOTHING RETURNING id`: no
   existence check before; the ids that come back were created;
2. for the ids that did not, one `SELECT` of their owners: same user is a
   skip, another user a refusal (nothing of it was written);
3. the sessions of the created turns, aggregated per session and upserted
   in id order (`ON CONFLICT (id) DO UPDATE ... WHERE user_id matches`): a
   session that comes back is ours, widened to the turns' times and titled
   by the first title given when it had none; one that does not is another
   user's, and its turns are deleted again, refused;
4. each owner's write count, one up (`chat.replica.note_user_writes`): the
   read replica's check that it shows a user's own turns.

The foreign key from a turn to its session is checked at commit (Django
creates it deferrable, initially deferred), so step 1 may precede step 3.
Rows are written in id order so that concurrent imports lock in one order.
PostgreSQL takes each step as one statement over a JSON document
(`jsonb_to_recordset`): one parameter, no per-value quoting in Python.
SQLite runs one statement per row, which costs nothing without a network.

Raw SQL, not the ORM's bulk operations (issue 23): `bulk_create` with
`ignore_conflicts` does not say which rows it created (no `RETURNING`), and
`update_conflicts` cannot keep a stored title, take the times' span or
leave another user's session alone; `bulk_create(ignore_conflicts=True)` of
the same 500 turns also measured twice the time of step 1
(bench/orm_vs_raw.py, "turns insert"). Each statement names its line.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from django.db import connection

from chat.models import ChatLog, ChatSession
from chat.replica import note_user_writes

__all__ = ["SessionWrite", "TurnRow", "WriteOutcome", "write_turns"]

WriteOutcome = Literal["created", "skipped"] | tuple[Literal["refused"], str, str]


@dataclass(frozen=True, slots=True)
class SessionWrite:
    """What one turn asks of its session: owner, title (may be None) and the turn's time."""

    id: uuid.UUID
    user_id: int
    title: str | None
    created_at: dt.datetime


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One `ai_chat_logs` row to insert: its columns by attribute name (`session_id`, `user_id`, ...)."""

    columns: dict[str, Any]
    session: SessionWrite


def _sessions(rows: Sequence[TurnRow]) -> list[dict[str, Any]]:
    """One upsert row per session: first non-empty title in turn order, the turns' time span."""
    merged: dict[uuid.UUID, dict[str, Any]] = {}
    for row in rows:
        s = row.session
        entry = merged.get(s.id)
        if entry is None:
            merged[s.id] = {
                "id": s.id,
                "user_id": s.user_id,
                "title": s.title or "",
                "created_at": s.created_at,
                "updated_at": s.created_at,
            }
            continue
        if not entry["title"] and s.title:
            entry["title"] = s.title
        entry["created_at"] = min(entry["created_at"], s.created_at)
        entry["updated_at"] = max(entry["updated_at"], s.created_at)
    return [merged[key] for key in sorted(merged)]


def _db_types(model: type[Any], names: Sequence[str]) -> list[str]:
    return [
        model._meta.get_field(name.removesuffix("_id") if name in ("session_id", "user_id") else name).db_type(
            connection
        )
        for name in names
    ]


def _pg_recordset(model: type[Any], names: Sequence[str], alias: str = "r") -> str:
    types = _db_types(model, names)
    return (
        f"jsonb_to_recordset(%s::jsonb) AS {alias}({', '.join(f'{n} {t}' for n, t in zip(names, types, strict=True))})"
    )


_SESSION_COLUMNS = ("id", "user_id", "title", "created_at", "updated_at")
# Keep a stored title; take the times' span; only for the owner (else no row comes back).
_SESSION_CONFLICT = (
    "ON CONFLICT (id) DO UPDATE SET "
    "title = CASE WHEN chat_sessions.title = '' THEN EXCLUDED.title ELSE chat_sessions.title END, "
    "created_at = LEAST(chat_sessions.created_at, EXCLUDED.created_at), "
    "updated_at = GREATEST(chat_sessions.updated_at, EXCLUDED.updated_at) "
    "WHERE chat_sessions.user_id = EXCLUDED.user_id"
)


def _insert_turns_pg(names: Sequence[str], rows: list[dict[str, Any]]) -> set[Any]:
    columns = ", ".join(names)
    source = _pg_recordset(ChatLog, names)
    # Column names come from the model, values travel as one parameter.
    # Raw: bench/orm_vs_raw.py "turns insert" (bulk_create: 2x, and no RETURNING).
    sql = (
        f"INSERT INTO ai_chat_logs ({columns}) SELECT {columns} FROM {source} ON CONFLICT (id) DO NOTHING RETURNING id"  # noqa: S608
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [orjson.dumps(rows).decode()])
        return {row[0] for row in cursor.fetchall()}


def _upsert_sessions_pg(sessions: list[dict[str, Any]]) -> set[Any]:
    columns = ", ".join(_SESSION_COLUMNS)
    source = _pg_recordset(ChatSession, _SESSION_COLUMNS)
    # Raw: bench/import_turns.py "import 10k turns" (no ORM upsert keeps a title, spans times, checks owner).
    sql = f"INSERT INTO chat_sessions ({columns}) SELECT {columns} FROM {source} {_SESSION_CONFLICT} RETURNING id"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, [orjson.dumps(sessions).decode()])
        return {row[0] for row in cursor.fetchall()}


def _prep(model: type[Any], name: str, value: Any) -> Any:
    field = model._meta.get_field(name.removesuffix("_id") if name in ("session_id", "user_id") else name)
    if name in ("session_id", "user_id"):
        field = field.target_field
    return field.get_db_prep_value(value, connection, prepared=False)


def _insert_turns_sqlite(names: Sequence[str], rows: list[dict[str, Any]]) -> set[Any]:
    values = ", ".join(["%s"] * len(names))
    # Raw: as `_insert_turns_pg` (bench/orm_vs_raw.py "turns insert"); one row per statement for its rowcount.
    sql = f"INSERT INTO ai_chat_logs ({', '.join(names)}) VALUES ({values}) ON CONFLICT (id) DO NOTHING"  # noqa: S608
    created = set()
    with connection.cursor() as cursor:
        for row in rows:
            cursor.execute(sql, [_prep(ChatLog, name, row[name]) for name in names])
            if cursor.rowcount == 1:
                created.add(row["id"])
    return created


def _upsert_sessions_sqlite(sessions: list[dict[str, Any]]) -> set[Any]:
    names = _SESSION_COLUMNS
    values = ", ".join(["%s"] * len(names))
    conflict = _SESSION_CONFLICT.replace("LEAST", "MIN").replace("GREATEST", "MAX")  # SQLite's scalar min/max
    # Raw: as `_upsert_sessions_pg` (bench/import_turns.py "import 10k turns").
    sql = f"INSERT INTO chat_sessions ({', '.join(names)}) VALUES ({values}) {conflict}"  # noqa: S608
    ours = set()
    with connection.cursor() as cursor:
        for session in sessions:
            cursor.execute(sql, [_prep(ChatSession, name, session[name]) for name in names])
            if cursor.rowcount == 1:
                ours.add(session["id"])
    return ours


def write_turns(rows: Sequence[TurnRow]) -> list[WriteOutcome]:
    """Insert `rows` and upsert their sessions (see the module docstring); one outcome per row, in order.

    Must run inside a transaction (the caller's batch). A refusal is
    `("refused", json_path, message)`. Raises `DatabaseError` when the
    database refuses a statement: the caller rolls the batch back.
    """
    if not rows:
        return []
    postgres = connection.vendor == "postgresql"
    first: dict[uuid.UUID, int] = {}
    for i, row in enumerate(rows):
        first.setdefault(row.columns["id"], i)
    unique = sorted(first.values(), key=lambda i: str(rows[i].columns["id"]))
    names = list(rows[0].columns)
    ordered = [rows[i].columns for i in unique]
    inserted = _insert_turns_pg(names, ordered) if postgres else _insert_turns_sqlite(names, ordered)
    created_ids = {uuid.UUID(str(value)) for value in inserted}

    created = [rows[i] for i in unique if rows[i].columns["id"] in created_ids]
    # A session is claimed by the first of its turns in the batch; a turn of
    # another user naming it is refused, as it would be one by one.
    claimant: dict[uuid.UUID, int] = {}
    for row in created:
        claimant.setdefault(row.session.id, row.session.user_id)
    sessions = _sessions([row for row in created if claimant[row.session.id] == row.session.user_id])
    upserted = _upsert_sessions_pg(sessions) if postgres else _upsert_sessions_sqlite(sessions)
    theirs = {s["id"] for s in sessions} - {uuid.UUID(str(value)) for value in upserted}

    def refused_for_session(row: TurnRow) -> bool:
        return row.session.id in theirs or claimant[row.session.id] != row.session.user_id

    if theirs or any(refused_for_session(row) for row in created):
        ChatLog.objects.filter(pk__in=[row.columns["id"] for row in created if refused_for_session(row)]).delete()
    # In this transaction: a read replica that shows these counts shows these turns (chat.replica).
    note_user_writes(row.columns["user_id"] for row in created if not refused_for_session(row))

    def session_refusal(row: TurnRow) -> WriteOutcome:
        return ("refused", "session.id", f"session {row.session.id} belongs to another user")

    outcomes: dict[int, WriteOutcome] = {}
    for i in unique:
        row = rows[i]
        if row.columns["id"] in created_ids:
            outcomes[i] = session_refusal(row) if refused_for_session(row) else "created"
    # Ids already stored, and repeats within the batch: whose are they now?
    rest = [i for i in range(len(rows)) if i not in outcomes]
    if rest:
        owners = dict(ChatLog.objects.filter(pk__in=[rows[i].columns["id"] for i in rest]).values_list("id", "user_id"))
        for i in rest:
            row = rows[i]
            owner = owners.get(row.columns["id"])
            if owner == row.columns["user_id"]:
                outcomes[i] = "skipped"
            elif owner is None:  # its first copy in this batch was refused for its session
                outcomes[i] = session_refusal(row)
            else:
                outcomes[i] = ("refused", "id", f"turn {row.columns['id']} belongs to another user")
    return [outcomes[i] for i in range(len(rows))]
