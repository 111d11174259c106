"""What differs between PostgreSQL and SQLite for live turns, in one place (docs/live.md#the-event-log).

- `append_batch`: a batch of a worker's events and the turn's row, together.
  On PostgreSQL one statement, in autocommit one round trip: the conditional
  `UPDATE` of the turn (the worker's token, the log's last id), the `INSERT`
  of the events and the `NOTIFY` that carries them to the streams
  (`live.wakeups`), each only when the `UPDATE` matched. On SQLite the same
  through the ORM in one `write_transaction`; no `NOTIFY`: streams poll.
- `write_transaction()`: every write transaction of a live turn (`transaction.atomic()`, and on SQLite this
  process's writers one at a time); `one_writer()` the same order without a transaction, for a function
  whose writes are each their own. No other module asks which database it runs on for a live turn.
- `claim_queued`: a worker takes a queued turn in one statement (`UPDATE ... RETURNING`), the row it
  runs coming back with it; `mark_sent`: the POST marks its turn's task sent, never waiting for the row.
- `notify_turn`: a turn that ended by its status alone wakes its streams.
- `listens()`: whether streams are woken by `NOTIFY` (PostgreSQL) or poll.
- `owned_turn_events_postgresql`: a user's turn and a page of its log in one statement (a direct stream
  open's read, `live.log.owned_turn_events`), and `events_after_postgresql` the page alone (a stream's
  read, `live.log.events_after`), where `reads_in_one_statement()`; else their querysets.
- `admit_postgresql`: a turn's admission in two statements, the user's row locked, then the checks and
  the inserts (`live.service`, where `reads_in_one_statement()`; else, or when a stuck turn must end
  first, the querysets).

Raw on PostgreSQL: bench/orm_vs_raw.py, "event batch".
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Field, Model
from django.utils import timezone

from chat.models import ChatSession
from live.models import ACTIVE_STATUSES, LiveTurn, LiveTurnEvent, LiveTurnStatus
from live.wakeups import NOTIFY_CHANNEL, notify_payload

__all__ = [
    "Admission",
    "admit_postgresql",
    "append_batch",
    "claim_queued",
    "events_after_postgresql",
    "listens",
    "mark_sent",
    "notify_turn",
    "one_writer",
    "owned_turn_events_postgresql",
    "reads_in_one_statement",
    "write_transaction",
]

#: `(seq, event, data)`: one event of the log, its `data` the JSON text sent.
Row = tuple[int, str, str]


@functools.cache
def listens() -> bool:
    """Whether this database wakes streams itself (`NOTIFY`, PostgreSQL); else streams poll the log. Read
    once a process (a stream asks it at its start; the connection proxy costs a context lookup each time)."""
    return connection.vendor == "postgresql"


@functools.cache
def reads_in_one_statement() -> bool:
    """Whether the statements written here serve (PostgreSQL: the reads in one statement, the admission in
    two); else the querysets they stand for. Read once a process."""
    return connection.vendor == "postgresql"


def events_after_postgresql(turn_id: uuid.UUID, after: int, limit: int) -> list[Row]:
    """The turn's events after `after` (at most `limit`, oldest first, `(seq, event, data)`): one statement
    (PostgreSQL), the page `owned_turn_events_postgresql` joins."""
    with connection.cursor() as cursor:
        cursor.execute(_events_after_sql(), [turn_id, after, limit])
        return [(seq, event, data) for seq, event, data in cursor.fetchall()]


@functools.cache
def _events_after_sql() -> str:
    return _page_sql("%s")


def _page_sql(turn: str) -> str:
    """A page of the log of the turn `turn` (a placeholder or a column) after an id, oldest first, at most a
    limit (the two placeholders that follow)."""
    n = _names()
    return (
        f"SELECT {n['event.seq']}, {n['event.event']}, {n['event.data']} FROM {n['events']} "  # noqa: S608
        f"WHERE {n['event.turn_id']} = {turn} AND {n['event.seq']} > %s ORDER BY {n['event.seq']} LIMIT %s"
    )


def owned_turn_events_postgresql(
    user_id: Any, turn_id: uuid.UUID, after: int, limit: int
) -> tuple[tuple[str, int, uuid.UUID], list[Row]] | None:
    """The turn's `(status, last_seq, session_id)` when it is `user_id`'s, with its events after `after`
    (at most `limit`, oldest first, `(seq, event, data)`), else None: the turn's row and a `LATERAL` page of
    its log, one statement (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute(_owned_turn_events_sql(), [after, limit, turn_id, user_id])
        found = cursor.fetchall()
    if not found:
        return None
    status, last_seq, session_id = found[0][:3]
    return (status, last_seq, session_id), [(seq, event, data) for *_, seq, event, data in found if seq is not None]


@functools.cache
def _owned_turn_events_sql() -> str:
    n = _names()
    return (
        f"SELECT t.{n['turn.status']}, t.{n['turn.last_seq']}, t.{n['turn.session_id']}, "  # noqa: S608
        f"e.{n['event.seq']}, e.{n['event.event']}, e.{n['event.data']} FROM {n['turns']} t "
        f"LEFT JOIN LATERAL ({_page_sql('t.' + n['turn.id'])}) e ON TRUE "
        f"WHERE t.{n['turn.id']} = %s AND t.{n['turn.user']} = %s ORDER BY e.{n['event.seq']}"
    )


@dataclass(frozen=True)
class Admission:
    """What `admit_postgresql` found, before its insert: whether another user holds the session (`elsewhere`:
    a session or a turn of theirs), the user's queued and running turns (`active`: rows with their id,
    session, status, `created_at` and `progressed_at` only), how many turns wait for a worker within the
    queue's timeout (`waiting`), and whether it wrote the turn and its first event (`admitted`)."""

    elsewhere: bool
    active: list[LiveTurn]
    waiting: int
    admitted: bool


def admit_postgresql(
    turn: LiveTurn, first: Row, *, max_active: int, max_waiting: int, waiting_since: dt.datetime
) -> Admission:
    """Admit `turn` (unsaved: its session, user and fields set) with its first event `first` (SPEC 11,
    docs/live.md#admission) in two statements (PostgreSQL), inside the caller's `write_transaction()`: the
    user's row locked (one admission at a time per user), then one statement that reads what admission
    decides on and inserts the turn and its event only when no other user holds the session, the session
    has no queued or running turn, the user has fewer than `max_active` of them (stuck ones counted) and
    fewer than `max_waiting` turns wait since `waiting_since` (an aware datetime; queued turns created since
    count). The caller decides on `Admission` what
    `live.service` decides on its querysets (a stuck turn among `active` sends it there). Raises
    `IntegrityError` when another user's admission took the session meanwhile (its unique constraint), and
    the database's other errors."""
    values = {f"v{i}": field.get_db_prep_save(field.pre_save(turn, True), connection) for i, field in _turn_fields()}
    params = {
        **values,
        "user": turn.user_id,
        "session": turn.session_id,
        "active": list(ACTIVE_STATUSES),
        "queued": LiveTurnStatus.QUEUED,
        "since": waiting_since,
        "max_active": max_active,
        "max_waiting": max_waiting,
        "seq": first[0],
        "event": first[1],
        "data": first[2],
    }
    with connection.cursor() as cursor:
        cursor.execute(_lock_user_sql(), [turn.user_id])
        cursor.execute(_admit_sql(), params)
        found = cursor.fetchall()
    elsewhere, waiting, admitted = found[0][:3]
    active = [
        LiveTurn(
            id=turn_id,
            session_id=session_id,
            user_id=turn.user_id,
            status=status,
            created_at=created,
            progressed_at=progressed,
        )
        for *_, turn_id, session_id, status, created, progressed in found
        if turn_id is not None
    ]
    return Admission(elsewhere=elsewhere, active=active, waiting=waiting, admitted=bool(admitted))


@functools.cache
def _turn_fields() -> list[tuple[int, Field]]:
    """`LiveTurn`'s columns, numbered: the admission's insert names each value `v<i>`."""
    return [(i, field) for i, field in enumerate(LiveTurn._meta.concrete_fields) if isinstance(field, Field)]


@functools.cache
def _lock_user_sql() -> str:
    user, quote = get_user_model(), connection.ops.quote_name
    return f"SELECT 1 FROM {quote(user._meta.db_table)} WHERE {quote(_column(user, 'id'))} = %s FOR UPDATE"  # noqa: S608


@functools.cache
def _admit_sql() -> str:
    n, quote = _names(), connection.ops.quote_name
    columns = ", ".join(n[f"turn.{field.name}"] for _, field in _turn_fields())
    # Cast to the column's type without its length (`varchar`, not `varchar(16)`): a cast cuts a longer text
    # to fit, where the insert refuses it, as the ORM's does.
    casts = ", ".join(
        f"CAST(%(v{i})s AS {str(field.db_type(connection)).split('(')[0]})" for i, field in _turn_fields()
    )
    session_table = quote(ChatSession._meta.db_table)
    session_id, session_user = quote(_column(ChatSession, "id")), quote(_column(ChatSession, "user"))

    def mine(table: str) -> str:  # the user's queued and running turns
        return f"{table}{n['turn.user']} = %(user)s AND {table}{n['turn.status']} = ANY(%(active)s)"

    return (
        "WITH found AS (SELECT "  # noqa: S608 - names from the models
        f"EXISTS (SELECT 1 FROM {session_table} WHERE {session_id} = %(session)s AND {session_user} <> %(user)s) "
        f"OR EXISTS (SELECT 1 FROM {n['turns']} WHERE {n['turn.session_id']} = %(session)s "
        f"AND {n['turn.user']} <> %(user)s) AS elsewhere, "
        f"(SELECT count(*) FROM {n['turns']} WHERE {n['turn.status']} = %(queued)s "
        f"AND {n['turn.created_at']} >= %(since)s) AS waiting, "
        f"(SELECT count(*) FROM {n['turns']} WHERE {mine('')}) AS active, "
        f"EXISTS (SELECT 1 FROM {n['turns']} WHERE {n['turn.session_id']} = %(session)s "
        f"AND {n['turn.status']} = ANY(%(active)s)) AS busy), "
        f"turn AS (INSERT INTO {n['turns']} ({columns}) SELECT {casts} FROM found "
        "WHERE NOT found.elsewhere AND NOT found.busy AND found.active < %(max_active)s "
        "AND found.waiting < %(max_waiting)s "
        f"RETURNING {n['turn.id']}), "
        f"event AS (INSERT INTO {n['events']} ({n['event.turn_id']}, {n['event.seq']}, {n['event.event']}, "
        f"{n['event.data']}) SELECT {n['turn.id']}, %(seq)s, %(event)s, %(data)s FROM turn) "
        f"SELECT found.elsewhere, found.waiting, (SELECT count(*) FROM turn), a.{n['turn.id']}, "
        f"a.{n['turn.session_id']}, a.{n['turn.status']}, a.{n['turn.created_at']}, a.{n['turn.progressed_at']} "
        f"FROM found LEFT JOIN {n['turns']} a ON {mine('a.')}"
    )


_sqlite_lock = threading.RLock()


@contextlib.contextmanager
def one_writer() -> Iterator[None]:
    """This process's writers one at a time where the database has one write lock (SQLite); nothing on
    PostgreSQL (it locks rows). Reentrant. For writes that are each their own transaction; a transaction
    is `write_transaction()`.

    SQLite has one write lock per database; threads that wait for it in
    SQLite's busy handler sleep in growing steps (up to 100 ms), which would
    stall every turn of a process. A Python lock hands it over at once. Taken
    before `BEGIN` (it is reentrant), so no thread waits for it while holding
    SQLite's lock.
    """
    if connection.vendor != "sqlite":
        yield
        return
    with _sqlite_lock:
        yield


@contextlib.contextmanager
def write_transaction() -> Iterator[None]:
    """A live turn's write transaction: `transaction.atomic()` inside `one_writer()` (on SQLite the
    process's lock is taken before `BEGIN`; on PostgreSQL only the transaction). Raises what the
    transaction raises; nested, it is a savepoint as `atomic()` is."""
    with one_writer(), transaction.atomic():
        yield


def append_batch(
    turn_id: uuid.UUID, token: uuid.UUID, rows: list[Row], *, after: int, finish: Mapping[str, Any] | None = None
) -> bool:
    """Append `rows` (ids `after + 1`, ...) to the turn's log and set its `last_seq` to the last, with the
    `finish` fields (`LiveTurn` attribute -> value) in the same write. False, and nothing written, when
    `token` no longer holds the running turn or its log moved past `after`."""
    finish = dict(finish or {})
    last = after + len(rows)
    if connection.vendor == "postgresql":
        return _append_postgresql(turn_id, token, rows, after=after, last=last, finish=finish)
    with write_transaction():
        updated = (
            LiveTurn.objects.running_for_worker(turn_id, token)
            .filter(last_seq=after)
            .update(last_seq=last, progressed_at=timezone.now(), **finish)
        )
        if updated:
            LiveTurnEvent.objects.bulk_create(
                LiveTurnEvent(turn_id=turn_id, seq=seq, event=event, data=data) for seq, event, data in rows
            )
    return bool(updated)


@functools.cache
def _names() -> dict[str, str]:
    """The live tables' and columns' names, quoted: `turns`, `events`, `turn.<field>` (each concrete field of
    `LiveTurn`), `turn.*` (all of them, in the model's order), `event.<field>`."""
    quote = connection.ops.quote_name
    turn_columns = {
        f"turn.{field.name}": quote(_column(LiveTurn, field.name)) for field in LiveTurn._meta.concrete_fields
    }
    return {
        "turns": quote(LiveTurn._meta.db_table),
        "events": quote(LiveTurnEvent._meta.db_table),
        **turn_columns,
        "turn.*": ", ".join(turn_columns.values()),
        **{f"event.{name}": quote(_column(LiveTurnEvent, name)) for name in ("turn_id", "seq", "event", "data")},
    }


def _field(model: type[Model], name: str) -> Field:
    field = model._meta.get_field(name)
    assert isinstance(field, Field), name
    return field


def _column(model: type[Model], name: str) -> str:
    column = _field(model, name).column
    assert column is not None, name
    return column


def _append_postgresql(
    turn_id: uuid.UUID, token: uuid.UUID, rows: list[Row], *, after: int, last: int, finish: dict[str, Any]
) -> bool:
    n = _names()
    sets, values = [f"{n['turn.last_seq']} = %s", f"{n['turn.progressed_at']} = now()"], [last]  # type: tuple[list[str], list[Any]]
    for name, value in finish.items():
        sets.append(f"{n[f'turn.{name}']} = %s")
        values.append(_field(LiveTurn, name).get_db_prep_save(value, connection))
    batch = orjson.dumps([{"seq": seq, "event": event, "data": data} for seq, event, data in rows]).decode()
    sql = (
        f"WITH turn AS (UPDATE {n['turns']} SET {', '.join(sets)} "  # noqa: S608 - names from the models
        f"WHERE {n['turn.id']} = %s AND {n['turn.worker_token']} = %s AND {n['turn.status']} = %s "
        f"AND {n['turn.last_seq']} = %s RETURNING {n['turn.id']}), "
        f"appended AS (INSERT INTO {n['events']} ({n['event.turn_id']}, {n['event.seq']}, {n['event.event']}, "
        f"{n['event.data']}) SELECT turn.{n['turn.id']}, e.seq, e.event, e.data FROM turn, "
        "jsonb_to_recordset(%s::jsonb) AS e(seq integer, event text, data text)) "
        "SELECT pg_notify(%s, %s) FROM turn"
    )
    params: list[Any] = [*values, turn_id, token, LiveTurnStatus.RUNNING, after, batch]
    params += [NOTIFY_CHANNEL, notify_payload(turn_id, rows)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return len(cursor.fetchall()) == 1


def claim_queued(turn_id: uuid.UUID, task_id: uuid.UUID | None, token: uuid.UUID, now: dt.datetime) -> LiveTurn | None:
    """Take the turn `turn_id` while it is `queued` (and `task_id`'s, unless None; SPEC 11, docs/job-engine.md):
    `running` under `token`, started and progressed at `now` (an aware datetime), in one statement on either
    database (`UPDATE ... RETURNING`; SQLite has it since 3.35). The row as written, or None when the turn is
    not queued or is another task's (`live.engine.turn_take` then reads it under a lock: a takeover, a stale
    task, nothing to run).

    In a transaction of its own, not in autocommit: a worker killed while its `UPDATE` waits for the row
    (another transaction holds it) must leave the turn queued, and an `UPDATE` in autocommit would commit
    once the row is free, the worker gone (PostgreSQL notices a dead client only when it next reads). Raises
    the database's errors (`DatabaseError`); nothing is written then."""
    n = _names()
    sets: dict[str, Any] = {"status": LiveTurnStatus.RUNNING, "worker_token": token, "started_at": now}
    sets["progressed_at"] = now
    where: dict[str, Any] = {"id": turn_id, "status": LiveTurnStatus.QUEUED}
    if task_id is not None:
        where["task_id"] = task_id
    sql = (
        f"UPDATE {n['turns']} SET "  # noqa: S608 - names from the model
        + ", ".join(f"{n[f'turn.{name}']} = %s" for name in sets)
        + " WHERE "
        + " AND ".join(f"{n[f'turn.{name}']} = %s" for name in where)
        + f" RETURNING {n['turn.*']}"
    )
    params = [
        _field(LiveTurn, name).get_db_prep_value(value, connection) for name, value in (*sets.items(), *where.items())
    ]
    with write_transaction():
        taken = list(LiveTurn.objects.raw(sql, params, using=connection.alias))
    return taken[0] if taken else None


def mark_sent(turn_id: uuid.UUID, task_id: uuid.UUID, now: dt.datetime) -> bool:
    """`sent_at = now` (an aware datetime) on the turn while its task is still `task_id` and it was not marked
    yet (SPEC 11, docs/job-engine.md#the-workers-sweep), in one autocommit statement that never waits for the
    row (PostgreSQL: the row picked `FOR UPDATE SKIP LOCKED`; a worker taking the turn may hold it). Whether
    it marked it; raises the database's errors (`DatabaseError`)."""
    if connection.vendor != "postgresql":
        with one_writer():
            unsent = LiveTurn.objects.filter(pk=turn_id, task_id=task_id, sent_at__isnull=True)
            return bool(unsent.update(sent_at=now))
    n = _names()
    sql = (
        f"UPDATE {n['turns']} SET {n['turn.sent_at']} = %s WHERE {n['turn.id']} = ("  # noqa: S608 - model names
        f"SELECT {n['turn.id']} FROM {n['turns']} WHERE {n['turn.id']} = %s AND {n['turn.task_id']} = %s "
        f"AND {n['turn.sent_at']} IS NULL FOR UPDATE SKIP LOCKED)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, turn_id, task_id])
        return cursor.rowcount == 1


def notify_turn(turn_id: uuid.UUID) -> None:
    """Wake the streams of `turn_id` to read its log (a turn ended by its status alone). PostgreSQL only."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, str(turn_id)])
