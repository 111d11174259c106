"""Retention (SPEC 16, docs/privacy.md#retention): the pruning services with a clock and a batch size, the 410 for a
reconnect to a pruned turn, the embedded broker's taken messages, and one pass through the Celery task."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.utils import timezone

from chat.models import ChatLog, ChatSession
from chat.retention import chat_logs_prune
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus
from live.retention import old_turns_prune, turn_logs_prune
from silvia.retention import RetentionCounts, retention_pass, retention_pass_task
from tests.factories import ChatLogFactory, ChatSessionFactory
from tests.live.test_erasure import live_turn

NOW = dt.datetime(2026, 12, 5, 12, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)


def ended(user, *, ago: dt.timedelta, status=LiveTurnStatus.DONE, events=3, checkpoint=None, session_id=None):
    turn = live_turn(session_id or uuid.uuid4(), user, status=status, events=events)
    LiveTurn.objects.filter(pk=turn.pk).update(
        finished_at=NOW - ago, created_at=NOW - ago - dt.timedelta(minutes=1), checkpoint=checkpoint
    )
    return turn


def test_turn_logs_prune_keeps_a_day_and_running_turns(maya):
    old = [ended(maya, ago=DAY + dt.timedelta(seconds=1), events=5) for _ in range(3)]
    failed = ended(maya, ago=2 * DAY, status=LiveTurnStatus.FAILED, checkpoint={"step": 1})
    fresh = ended(maya, ago=DAY - dt.timedelta(seconds=1), status=LiveTurnStatus.FAILED, checkpoint={"step": 1})
    running = live_turn(uuid.uuid4(), maya, status=LiveTurnStatus.RUNNING, events=4)
    LiveTurn.objects.filter(pk=running.pk).update(created_at=NOW - 3 * DAY)
    assert turn_logs_prune(now=NOW, keep=DAY, batch_size=4) == (18, 1)  # 15 + 3 events, in 5 batches of 4
    for turn in [*old, failed]:
        assert not LiveTurnEvent.objects.filter(turn=turn).exists()
        assert LiveTurn.objects.filter(pk=turn.pk).exists()  # the row stays, for the 410
    assert LiveTurn.objects.get(pk=failed.pk).checkpoint is None
    assert LiveTurn.objects.get(pk=fresh.pk).checkpoint == {"step": 1}
    assert LiveTurnEvent.objects.filter(turn=fresh).count() == 3
    assert LiveTurnEvent.objects.filter(turn=running).count() == 4
    assert turn_logs_prune(now=NOW, keep=DAY, batch_size=4) == (0, 0)  # idempotent


def test_batch_size_must_be_positive(maya):
    with pytest.raises(ValueError, match="batch_size"):
        turn_logs_prune(now=NOW, keep=DAY, batch_size=0)


def test_a_reconnect_to_a_pruned_turn_is_410_naming_its_session(maya, token_client):
    turn = ended(maya, ago=2 * DAY)
    assert token_client.get(f"/api/chat/turns/{turn.id}/events", HTTP_LAST_EVENT_ID="3").status_code == 204
    turn_logs_prune(now=NOW, keep=DAY, batch_size=100)
    for query in ("", "?after=0", "?protocol=ai-sdk"):
        response = token_client.get(f"/api/chat/turns/{turn.id}/events{query}")
        assert response.status_code == 410, query
        assert response.json() == {
            "detail": "This answer's events are no longer kept. Its conversation holds the saved answer.",
            "session_id": str(turn.session_id),
        }
    assert token_client.get(f"/api/chat/turns/{uuid.uuid4()}/events").status_code == 404


def test_chat_logs_prune_by_age_then_empty_sessions(maya):
    old_session = ChatSessionFactory.create(user=maya, updated_at=NOW - 40 * DAY)
    mixed = ChatSessionFactory.create(user=maya, updated_at=NOW - DAY)
    old_logs = [ChatLogFactory.create(session=old_session, created_at=NOW - 40 * DAY) for _ in range(3)]
    ChatLogFactory.create(session=mixed, created_at=NOW - 31 * DAY)
    kept = ChatLogFactory.create(session=mixed, created_at=NOW - DAY)
    assert chat_logs_prune(now=NOW, max_age=30 * DAY, batch_size=2) == (4, 1)
    assert not ChatLog.objects.filter(pk__in=[log.pk for log in old_logs]).exists()
    assert list(ChatLog.objects.values_list("pk", flat=True)) == [kept.pk]
    assert list(ChatSession.objects.values_list("pk", flat=True)) == [mixed.pk]


def test_old_turns_prune_takes_the_turn_rows_too(maya):
    ended(maya, ago=40 * DAY)
    young = ended(maya, ago=DAY)
    assert old_turns_prune(now=NOW, max_age=30 * DAY, batch_size=1) == (1, 3)
    assert list(LiveTurn.objects.values_list("pk", flat=True)) == [young.pk]


def embedded_broker(settings, folder):
    """The embedded broker on a file of this test's own (silvia.embedded_broker), three messages taken of five."""
    from kombu import Connection

    from silvia.embedded_broker import Transport

    settings.CELERY_BROKER_EMBEDDED = True
    settings.CELERY_BROKER_URL = f"sqlite:///{folder / 'broker.sqlite3'}"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"connect_args": {"timeout": 30}}
    with Connection(settings.CELERY_BROKER_URL, transport=Transport) as broker:
        queue = broker.SimpleQueue(settings.CELERY_TASK_DEFAULT_QUEUE)
        for n in range(5):
            queue.put({"n": n})
        taken = [queue.get(timeout=5) for _ in range(3)]
        for message in taken:
            message.ack()
        queue.close()
    return [message.payload["n"] for message in taken]


def broker_rows(settings):
    import sqlite3

    with sqlite3.connect(settings.CELERY_BROKER_URL.removeprefix("sqlite:///")) as db:
        return db.execute("SELECT visible, count(*) FROM kombu_message GROUP BY visible ORDER BY visible").fetchall()


def test_taken_broker_messages_are_removed_and_waiting_ones_kept(db, settings, tmp_path):
    from kombu import Connection

    from silvia.embedded_broker import Transport, prune_taken_messages

    assert embedded_broker(settings, tmp_path) == [0, 1, 2]
    assert broker_rows(settings) == [(0, 3), (1, 2)]  # kombu keeps the taken ones
    assert prune_taken_messages(batch_size=2) == 3
    assert broker_rows(settings) == [(1, 2)]
    with Connection(settings.CELERY_BROKER_URL, transport=Transport) as broker:  # the others still come
        queue = broker.SimpleQueue(settings.CELERY_TASK_DEFAULT_QUEUE)
        assert [queue.get(timeout=5).payload["n"] for _ in range(2)] == [3, 4]
        queue.close()


def test_one_pass_through_the_task(maya, settings, tmp_path):
    """The Celery task runs every service once with the settings' ages; unset CHAT_LOG_MAX_AGE_DAYS keeps logs."""
    embedded_broker(settings, tmp_path)
    ended(maya, ago=2 * DAY)
    long_ago = timezone.now() - 400 * DAY
    session = ChatSessionFactory.create(user=maya, created_at=long_ago, updated_at=long_ago)
    log = ChatLogFactory.create(session=session, created_at=long_ago)
    settings.CHAT_LOG_MAX_AGE_DAYS = None
    assert retention_pass(now=NOW) == RetentionCounts(events=3, broker_messages=3)
    assert ChatLog.objects.filter(pk=log.pk).exists()
    settings.CHAT_LOG_MAX_AGE_DAYS = 365
    old = ended(maya, ago=timezone.now() - long_ago)
    result = retention_pass_task.apply().get()
    assert result == {
        "events": 3,
        "checkpoints": 0,
        "chat_logs": 1,
        "sessions": 1,
        "live_turns": 1,
        "broker_messages": 0,
    }
    assert not ChatLog.objects.exists() and not LiveTurn.objects.filter(pk=old.pk).exists()
