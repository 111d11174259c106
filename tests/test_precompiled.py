"""`chat.precompiled.PrecompiledQuery`: Django's SQL compiled once, run with other values, same rows as the ORM."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from chat.models import ChatSession
from chat.precompiled import PrecompiledQuery
from chat.selectors import session_count_for_user, session_detail_for_user
from tests.factories import ChatLogFactory, ChatSessionFactory

pytestmark = pytest.mark.django_db


def _sessions(session_id, user_id):
    return ChatSession.objects.filter(pk=session_id, user_id=user_id).values_list("id", "title", "created_at")


def test_rows_are_the_orms_with_each_value_in_place(maya, other_user):
    query = PrecompiledQuery(_sessions, uuid.UUID(int=1), -1)
    mine = ChatSessionFactory.create(user=maya, created_at=dt.datetime(2026, 3, 4, 5, 6, 7, 8, tzinfo=dt.UTC))
    theirs = ChatSessionFactory.create(user=other_user)
    for session, user in ((mine, maya), (theirs, other_user), (mine, other_user)):
        assert query.rows(session.id, user.pk) == list(_sessions(session.id, user.pk))
    # Dates come back through Django's converters (SQLite stores text).
    assert query.rows(mine.id, maya.pk)[0][2] == dt.datetime(2026, 3, 4, 5, 6, 7, 8, tzinfo=dt.UTC)


def test_each_shape_is_compiled_once_and_the_oldest_dropped(maya, monkeypatch):
    for n in range(5):
        ChatSessionFactory.create(user=maya, title=f"s{n}")
    built = []

    def build(user_id, bottom, top):
        built.append((bottom, top))
        return ChatSession.objects.filter(user_id=user_id).order_by("title")[bottom:top].values_list("title")

    query = PrecompiledQuery(build, -1)
    monkeypatch.setattr(PrecompiledQuery, "MAX_SHAPES", 2)
    assert query.rows(maya.pk, shape=(0, 2)) == [("s0",), ("s1",)]
    assert query.rows(maya.pk, shape=(0, 2)) == [("s0",), ("s1",)]
    assert query.rows(maya.pk, shape=(2, 4)) == [("s2",), ("s3",)]
    assert query.rows(maya.pk, shape=(4, 6)) == [("s4",)]
    assert query.rows(maya.pk, shape=(0, 2)) == [("s0",), ("s1",)]  # dropped, compiled again
    assert built == [(0, 2), (2, 4), (4, 6), (0, 2)]


def test_a_marker_that_is_no_parameter_is_refused(maya):
    query = PrecompiledQuery(lambda user_id: ChatSession.objects.filter(user_id=maya.pk), -1)
    with pytest.raises(ValueError, match="not a parameter"):
        query.rows(maya.pk)


def test_the_selectors_answer_as_before(maya, other_user):
    session = ChatSessionFactory.create(user=maya)
    logs = ChatLogFactory.create_batch(3, session=session)
    ChatSessionFactory.create(user=other_user)
    assert session_count_for_user(user=maya) == 1
    detail = session_detail_for_user(session_id=session.id, user=maya, after=logs[0].id)
    assert detail is not None and detail.message_count == 3 and detail.session == session
    assert detail.last_message_at == max(log.created_at for log in logs)
    assert detail.after is not None and detail.after.id == logs[0].id
    assert session_detail_for_user(session_id=session.id, user=other_user) is None
    unknown_after = session_detail_for_user(session_id=session.id, user=maya, after=uuid.uuid4())
    assert unknown_after is not None and unknown_after.after is None
