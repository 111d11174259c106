"""Benchmark: the raw statements left in the code against the ORM's bulk operations doing the same write (issue 23).

    .venv/bin/python bench/orm_vs_raw.py [--turns 500] [--rounds 9] [--database-url URL]

On a scratch PostgreSQL database, `--turns` records derived from
`examples/turns` (bench/import_turns.py) are prepared by the service's own
code, then, taking turns, each inside a transaction that is rolled back:

- turns: `chat.imports.writer`'s `INSERT ... SELECT FROM jsonb_to_recordset ...
  ON CONFLICT DO NOTHING RETURNING id` against
  `ChatLog.objects.bulk_create(..., ignore_conflicts=True)` of the same rows
  (which, besides, cannot say which rows it created);
- backfill: `chat.backfill`'s `UPDATE ... FROM jsonb_to_recordset` of a
  batch against `ChatLog.objects.bulk_update(..., ["citations",
  "inline_citations"])` of the same rows and values;
- hot reads: each of `chat.hot_reads`' statements (the token's user, the
  session count, a session's head, a 100-turn session's rows) against the
  queryset it stands for, the SQLite branch of the same function;
- event batch: `live.db`'s one statement (`UPDATE` + `INSERT` + `NOTIFY`) for
  a batch of 5 events against the ORM's conditional `update()` and
  `bulk_create` with the same `pg_notify`, in a transaction (issue 30);
- stream reads: `live.log.events_after` (a stream's read of a 12-event log)
  and `live.log.owned_turn_events` (a direct open's read: the turn and its
  page), each `live.db` statement against the querysets it stands for, the
  SQLite branch of the same function (issue 36);
- admission: `live.service`'s admission of a turn, on PostgreSQL two
  statements (`live.db.admit_postgresql`) against the querysets they stand
  for, SQLite's branch of the same function (issue 36).

The rule (issue 23): the ORM wherever it is within 10% of the raw
statement. Each line prints raw/ORM medians and the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._scratch import create_database, database_urls, drop_database, scratch_name  # noqa: E402
from bench._timing import (  # noqa: E402
    DEFAULT_SERVER_URL,
    MIN_ROUNDS,
    Ratio,
    Timings,
    postgres_server_url,
    time_alternately,
)

GOAL_ORM = 1.1


def _verdict(what: str, t: dict[str, Timings]) -> str:
    ratio = Ratio.of(t["orm"], t["raw"])
    keep = "the ORM is within 10%: use it" if ratio.value <= GOAL_ORM else "the raw statement stays"
    return f"  {what}: ORM/raw {ratio.text()}: {keep}"


def run(*, server_url: str, turns: int, rounds: int) -> None:
    import environ
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connections, transaction

    from bench.import_turns import derived_records
    from chat.backfill import RowPlan as _RowPlan
    from chat.backfill.table import BackfillTable as _Table
    from chat.imports.writer import _insert_turns_pg, write_turns
    from chat.models import ChatLog
    from chat.services import TurnLimits, prepare_row
    from citations.backfill import backfill_citation_list
    from citations.turn import parse_turn_record

    name = scratch_name("orm")
    create_database(server_url, name)
    try:
        _, django_url = database_urls(server_url, name)
        settings.DATABASES["default"] = {**settings.DATABASES["default"], **environ.Env.db_url_config(django_url)}
        settings.DATABASES["default"]["OPTIONS"] = {}
        connections.close_all()
        del connections["default"]
        call_command("migrate", verbosity=0)
        user = get_user_model().objects.create(username="maya")
        limits = TurnLimits.from_settings()
        rows = [prepare_row(parse_turn_record(r, user_given=True), user.pk, limits).row for r in derived_records(turns)]
        columns = [row.columns for row in rows]
        names = list(columns[0])

        def raw_insert() -> None:
            with transaction.atomic():
                _insert_turns_pg(names, columns)
                transaction.set_rollback(True)

        def orm_insert() -> None:
            with transaction.atomic():
                ChatLog.objects.bulk_create([ChatLog(**c) for c in columns], ignore_conflicts=True)
                transaction.set_rollback(True)

        t = time_alternately({"raw": raw_insert, "orm": orm_insert}, runs=rounds)
        print(f"orm_vs_raw bench, PostgreSQL: {turns} turns inserted (import_turns' statement), {rounds} rounds")
        print(t["raw"].line("raw INSERT ... FROM jsonb_to_recordset"))
        print(t["orm"].line("bulk_create(ignore_conflicts=True)"))
        print(_verdict("turns insert", t), flush=True)

        # The backfill's write: the same rows with their citations typed (old rows: no targets yet).
        with transaction.atomic():
            write_turns(rows)
        table = _Table(ChatLog, "default")
        stored = table.scan(None, turns)
        plans: list[tuple[Any, _RowPlan]] = []
        for row_id, citations, inline in stored:
            untyped = [[{k: v for k, v in e.items() if k != "target"} for e in table.decode(n, raw)]
                       for n, raw in (("citations", citations), ("inline_citations", inline))]  # fmt: skip
            plans.append((row_id, _RowPlan(None, *(backfill_citation_list(u) for u in untyped))))
        objects = [
            ChatLog(id=row_id, citations=p.lists[0].value, inline_citations=p.lists[1].value) for row_id, p in plans
        ]

        def raw_write() -> None:
            with transaction.atomic():
                table.write(plans)
                transaction.set_rollback(True)

        def orm_write() -> None:
            with transaction.atomic():
                ChatLog.objects.bulk_update(objects, ["citations", "inline_citations"], batch_size=len(objects))
                transaction.set_rollback(True)

        t = time_alternately({"raw": raw_write, "orm": orm_write}, runs=rounds)
        print(f"orm_vs_raw bench, PostgreSQL: {turns} rows' JSON columns rewritten (the backfill's batch write)")
        print(t["raw"].line("raw UPDATE ... FROM jsonb_to_recordset"))
        print(t["orm"].line("bulk_update(citations, inline_citations)"))
        print(_verdict("backfill write", t), flush=True)
        _hot_reads(user, rows, rounds)
        _event_batch(user, rounds)
        _stream_reads(user, rounds)
        _admission(user, rounds)
    finally:
        connections.close_all()
        drop_database(server_url, name)


def _hot_reads(user: Any, rows: list[Any], rounds: int) -> None:
    """Each hot read against its queryset (the SQLite branch of the same function), on the turns above."""
    from unittest import mock

    from django.db import transaction
    from rest_framework.authtoken.models import Token

    from chat import hot_reads, selectors
    from chat.api.rendering import MESSAGE_COLUMNS
    from chat.imports.writer import write_turns
    from chat.models import ChatSession

    with transaction.atomic():
        write_turns(rows[:100])
    key = Token.objects.create(user=user).key
    session_id = rows[0].session.id
    fields = [name for name, _ in MESSAGE_COLUMNS]
    session = ChatSession.objects.get(pk=session_id)
    # Each statement of chat.hot_reads, and the queryset chat.selectors runs where it is not available (SQLite;
    # tests/chat/test_hot_reads.py holds the two equal).
    reads = {
        "token's user": (lambda: hot_reads.token_user(key), lambda: hot_reads.token_user(key)),
        "session count": (
            lambda: hot_reads.session_count(user.pk),
            lambda: selectors.session_count_for_user(user=user),
        ),
        "session head": (
            lambda: hot_reads.session_head(session_id, user.pk),
            lambda: selectors._session_head(session_id, user.pk),
        ),
        "session rows": (
            lambda: hot_reads.session_rows(session_id, fields),
            lambda: list(selectors.session_message_rows(session=session, fields=fields)),
        ),
    }
    print("orm_vs_raw bench, PostgreSQL: the reads every API request makes (chat.hot_reads), 200 each a round")
    for what, (statement, queryset) in reads.items():
        # the queryset branch where the statements are not `available`
        _time_reads(
            f"hot reads, {what}",
            statement,
            queryset,
            mock.patch.object(hot_reads, "available", return_value=False),
            rounds,
        )


def _time_reads(what: str, statement: Any, queryset: Any, querysets_branch: Any, rounds: int) -> None:
    """`statement()` against `queryset()`, 200 calls a round each, alternated; `queryset()` run inside
    `querysets_branch` (a patch that sends the function to its queryset branch, or a null context)."""

    def raw() -> None:
        for _ in range(200):
            statement()

    def orm() -> None:
        with querysets_branch:
            for _ in range(200):
                queryset()

    t = time_alternately({"raw": raw, "orm": orm}, runs=rounds)
    print(t["raw"].line(f"{what}: one statement"))
    print(t["orm"].line(f"{what}: the queryset(s)"))
    print(_verdict(what, t), flush=True)


def _event_batch(user: Any, rounds: int) -> None:
    """A batch of a worker's events: live.db's one statement against the ORM's update, insert and notify."""
    import uuid

    from django.db import connection, transaction

    from live import db
    from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus
    from live.wakeups import NOTIFY_CHANNEL, notify_payload

    token = uuid.uuid4()
    turns = [
        LiveTurn.objects.create(
            session_id=uuid.uuid4(), user=user, user_message="q", prompt_version="v5",
            status=LiveTurnStatus.RUNNING, worker_token=token, last_seq=1,
        )
        for _ in range(2)
    ]  # fmt: skip
    batch = [(2 + i, "text", '{"text":"Your card\'s annual fee is $95."}') for i in range(5)]
    print("orm_vs_raw bench, PostgreSQL: a batch of 5 events appended 200 times a round (live.db)")

    def raw() -> None:
        turn = turns[0]
        with transaction.atomic():
            for _ in range(200):
                assert db.append_batch(turn.id, token, batch, after=1)
                LiveTurn.objects.filter(pk=turn.id).update(last_seq=1)
                LiveTurnEvent.objects.filter(turn=turn).delete()
            transaction.set_rollback(True)

    def orm() -> None:
        turn = turns[1]
        with transaction.atomic():
            for _ in range(200):
                with transaction.atomic():
                    updated = LiveTurn.objects.running_for_worker(turn.id, token).filter(last_seq=1).update(last_seq=6)
                    assert updated
                    LiveTurnEvent.objects.bulk_create(
                        LiveTurnEvent(turn_id=turn.id, seq=seq, event=event, data=data) for seq, event, data in batch
                    )
                    with connection.cursor() as cursor:
                        cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, notify_payload(turn.id, batch)])
                LiveTurn.objects.filter(pk=turn.id).update(last_seq=1)
                LiveTurnEvent.objects.filter(turn=turn).delete()
            transaction.set_rollback(True)

    t = time_alternately({"raw": raw, "orm": orm}, runs=rounds)
    print(t["raw"].line("one statement (UPDATE + INSERT + NOTIFY)"))
    print(t["orm"].line("update() + bulk_create + pg_notify, a savepoint"))
    print(_verdict("event batch", t), flush=True)


def _stream_reads(user: Any, rounds: int) -> None:
    """A stream's read and a direct open's read (live.log) against the querysets they stand for."""
    import uuid
    from unittest import mock

    import live.log
    from live.log import events_after, owned_turn_events
    from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus

    turn = LiveTurn.objects.create(
        session_id=uuid.uuid4(), user=user, user_message="q", prompt_version="v5",
        status=LiveTurnStatus.RUNNING, last_seq=12,
    )  # fmt: skip
    LiveTurnEvent.objects.bulk_create(
        LiveTurnEvent(turn=turn, seq=seq, event="text", data='{"text":"Your card\'s annual fee is $95."}')
        for seq in range(1, 13)
    )
    reads = {
        "a stream's read (events_after)": lambda: events_after(turn.pk, 0, limit=1000),
        "a direct open's read (owned_turn_events)": lambda: owned_turn_events(user.pk, turn.pk, 0, limit=1000),
    }
    print("orm_vs_raw bench, PostgreSQL: a turn's log of 12 events read 200 times a round (live.log)")
    for what, read in reads.items():  # the same function, sent to its querysets by the patch
        _time_reads(
            f"stream reads, {what}",
            read,
            read,
            mock.patch.object(live.log, "reads_in_one_statement", return_value=False),
            rounds,
        )


def _admission(user: Any, rounds: int) -> None:
    """A turn's admission (live.service): PostgreSQL's two statements (live.db.admit_postgresql) against the
    querysets they stand for (SQLite's branch of the same function), 200 admissions a round, each round in a
    transaction rolled back (no task is queued)."""
    import uuid

    from django.conf import settings
    from django.db import transaction

    from live import service

    settings.LIVE_TURN_MAX_PER_USER = 10**6  # 200 turns of one user at once, for the bench only

    def admit() -> None:
        with transaction.atomic():
            for _ in range(200):
                service._admit(user=user, session_id=uuid.uuid4(), message="fee?", prompt_version="v5")
            transaction.set_rollback(True)

    print("orm_vs_raw bench, PostgreSQL: a turn admitted 200 times a round, rolled back (live.service)")
    t = time_alternately(
        {"raw": admit, "orm": lambda: _querysets_branch(admit, service)},
        runs=rounds,
    )
    print(t["raw"].line("admission: two statements (the user's lock, the checks with the inserts)"))
    print(t["orm"].line("admission: the querysets (two exists, lock, active turns, queue count, two inserts)"))
    print(_verdict("admission", t), flush=True)


def _querysets_branch(run: Any, service: Any) -> None:
    from unittest import mock

    with mock.patch.object(service, "reads_in_one_statement", return_value=False):
        run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--database-url", help=f"PostgreSQL server (default DATABASE_URL when postgres://, else {DEFAULT_SERVER_URL})"
    )
    args = parser.parse_args(argv)
    server_url = postgres_server_url(args.database_url)
    os.environ["DATABASE_URL"] = "sqlite:///var/bench-placeholder.sqlite3"
    from bench._django import use_bench_settings

    use_bench_settings()
    import django

    django.setup()
    run(server_url=server_url, turns=args.turns, rounds=max(args.rounds, MIN_ROUNDS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
