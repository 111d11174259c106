"""Live turns moved from `chat` to `live` (migrations `live` 0001 and `chat` 0009): state only, data kept.

A database migrated before the move, holding a turn, its events and the content types staff permissions
hang on, is migrated across it: the rows read back through `live.models`, the tables kept their names, the
content types now say `live`, and back again.
"""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("chat", "0008_live_turn_task_and_progress"), ("live", None)]
AFTER = [("chat", "0009_live_turns_belong_to_live"), ("live", "0001_initial")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    nodes = [target for target in targets if target[1] is not None]
    return executor.loader.project_state([*nodes, ("contenttypes", "0002_remove_content_type_name")]).apps


def _migrate_to_the_latest() -> None:
    """Every app at its leaf migration again (migrating back to `BEFORE` also unapplied chat's later ones)."""
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def _content_type_labels(apps) -> set[tuple[str, str]]:
    content_type = apps.get_model("contenttypes", "ContentType")
    return set(content_type.objects.filter(model__in=("liveturn", "liveturnevent")).values_list("app_label", "model"))


def test_a_turn_stored_before_the_move_reads_back_through_live_models():
    user = UserFactory.create()
    old = _migrate(BEFORE)
    content_type = old.get_model("contenttypes", "ContentType")
    content_type.objects.filter(model__in=("liveturn", "liveturnevent")).delete()  # as a database made before it
    content_type.objects.create(app_label="chat", model="liveturn")
    content_type.objects.create(app_label="chat", model="liveturnevent")
    turn_id = uuid.uuid4()
    old_turn = old.get_model("chat", "LiveTurn").objects.create(
        id=turn_id,
        session_id=uuid.uuid4(),
        user_id=user.pk,
        user_message="How much do I owe?",
        prompt_version="v5",
        status="running",
        last_seq=2,
    )
    old.get_model("chat", "LiveTurnEvent").objects.create(turn=old_turn, seq=2, event="text", data='{"text":"Hi"}')
    try:
        new = _migrate(AFTER)
        assert _content_type_labels(new) == {("live", "liveturn"), ("live", "liveturnevent")}
        _migrate_to_the_latest()  # the models below are today's (live 0002 added a column since)
        turn = LiveTurn.objects.get(pk=turn_id)
        assert (turn.status, turn.last_seq, turn.user_id) == (LiveTurnStatus.RUNNING, 2, user.pk)
        assert list(LiveTurnEvent.objects.filter(turn=turn).values_list("seq", "event", "data")) == [
            (2, "text", '{"text":"Hi"}')
        ]
        assert LiveTurn._meta.db_table == "chat_live_turns"
        assert LiveTurnEvent._meta.db_table == "chat_live_turn_events"
        back = _migrate(BEFORE)
        assert _content_type_labels(back) == {("chat", "liveturn"), ("chat", "liveturnevent")}
        assert back.get_model("chat", "LiveTurn").objects.filter(pk=turn_id).exists()
    finally:
        _migrate_to_the_latest()
        LiveTurn.objects.filter(pk=turn_id).delete()
