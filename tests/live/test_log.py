"""`live.log`'s reads of a turn: `owned_turn_events`, what a direct stream open reads (docs/live.md#direct-opens),
and `events_after`, a stream's read: by hand on either database, and, as a property on PostgreSQL (where each is
a statement of its own), equal to the querysets they stand for, on any rows (hypothesis)."""

from __future__ import annotations

import uuid
from unittest import mock

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import live.log
from live.log import events_after, owned_turn, owned_turn_events
from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus

pytestmark = pytest.mark.django_db


def _turn(user, *, seqs=(), status=LiveTurnStatus.RUNNING) -> LiveTurn:
    turn = LiveTurn.objects.create(
        session_id=uuid.uuid4(), user=user, user_message="hi", prompt_version="v5", status=status,
        last_seq=max(seqs, default=0),
    )  # fmt: skip
    LiveTurnEvent.objects.bulk_create(
        LiveTurnEvent(turn=turn, seq=seq, event="text", data=f'{{"delta":"é {seq}"}}') for seq in seqs
    )
    return turn


def test_the_owners_turn_comes_with_the_page_of_its_log_after_the_id(django_user_model):
    owner, other = django_user_model.objects.create(username="a"), django_user_model.objects.create(username="b")
    turn = _turn(owner, seqs=(3, 1, 2, 4))
    assert owned_turn_events(owner.pk, turn.pk, 1, limit=2) == (
        ("running", 4, turn.session_id),
        [(2, "text", '{"delta":"é 2"}'), (3, "text", '{"delta":"é 3"}')],
    )
    assert owned_turn_events(owner.pk, turn.pk, 4) == (("running", 4, turn.session_id), [])
    assert owned_turn_events(other.pk, turn.pk, 0) is None  # another user's turn is not found
    assert owned_turn_events(owner.pk, uuid.uuid4(), 0) is None


def test_a_turn_without_events_comes_with_an_empty_page(django_user_model):
    owner = django_user_model.objects.create(username="a")
    turn = _turn(owner, status=LiveTurnStatus.QUEUED)
    assert owned_turn_events(owner.pk, turn.pk, 0) == (("queued", 0, turn.session_id), [])


@pytest.mark.skipif(connection.vendor != "postgresql", reason="statements of their own on PostgreSQL only")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    turns=st.lists(st.tuples(st.integers(0, 1), st.sets(st.integers(1, 12), max_size=8)), min_size=1, max_size=4),
    after=st.integers(0, 13),
    limit=st.integers(1, 9),
)
def test_the_statements_are_their_querysets_on_any_rows(django_user_model, turns, after, limit):
    LiveTurn.objects.all().delete()
    users = [django_user_model.objects.get_or_create(username=name)[0] for name in ("prop-a", "prop-b")]
    made = [_turn(users[owner], seqs=seqs) for owner, seqs in turns]
    for turn in [*made, LiveTurn(pk=uuid.uuid4())]:
        found_events = events_after(turn.pk, after, limit=limit)
        found = {user.pk: owned_turn_events(user.pk, turn.pk, after, limit=limit) for user in users}
        with mock.patch.object(live.log, "reads_in_one_statement", return_value=False):  # the querysets
            expected_events = events_after(turn.pk, after, limit=limit)
            expected = {user.pk: owned_turn_events(user.pk, turn.pk, after, limit=limit) for user in users}
        assert found_events == expected_events
        assert found == expected
        for user in users:  # and the querysets are owned_turn's and events_after's
            turn_row = owned_turn(user.pk, turn.pk)
            assert expected[user.pk] == (None if turn_row is None else (turn_row, expected_events))
