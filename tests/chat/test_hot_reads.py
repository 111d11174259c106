"""`chat.hot_reads`, the session reads as one statement each on PostgreSQL: by hand through `chat.selectors`
(the one way in: the statements on PostgreSQL, their querysets on SQLite), and, as a property on PostgreSQL,
each statement equal to its queryset on the same rows, whatever the rows (hypothesis)."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token

from chat import hot_reads
from chat.api.rendering import MESSAGE_COLUMNS
from chat.models import ChatLog, ChatSession
from chat.selectors import (
    SessionListPages,
    _session_head,
    session_count_for_user,
    session_detail_for_user,
    session_list_for_user,
    session_message_rows,
    session_message_rows_fetched,
    sessions_with_message_counts,
)
from tests.factories import ChatLogFactory, ChatSessionFactory

pytestmark = pytest.mark.django_db

FIELDS = [name for name, _ in MESSAGE_COLUMNS]


def test_token_user_is_the_tokens_user_with_every_field():
    user = User.objects.create_user("hot", email="hot@example.org", password="x", first_name="Hé")
    token = Token.objects.create(user=user)
    found = hot_reads.token_user(token.key)
    stored = User.objects.get(pk=user.pk)
    fields = [f.attname for f in User._meta.concrete_fields]
    assert isinstance(found, User) and [getattr(found, f) for f in fields] == [getattr(stored, f) for f in fields]
    assert found.first_name == "Hé" and found.date_joined.tzinfo is not None
    assert hot_reads.token_user("0" * 40) is None


def test_session_count_counts_the_users_sessions_only(django_user_model):
    mine, theirs = django_user_model.objects.create(username="a"), django_user_model.objects.create(username="b")
    for _ in range(3):
        ChatSessionFactory.create(user=mine)
    ChatSessionFactory.create(user=theirs)
    assert (session_count_for_user(user=mine), session_count_for_user(user=theirs)) == (3, 1)
    assert session_count_for_user(user=django_user_model(pk=mine.pk + theirs.pk + 1)) == 0


def test_session_head_is_the_row_its_count_and_latest_turn(django_user_model):
    owner, other = django_user_model.objects.create(username="a"), django_user_model.objects.create(username="b")
    session = ChatSessionFactory.create(user=owner, title="Card balances")
    first = dt.datetime(2026, 11, 2, 9, 30, 1, 123456, tzinfo=dt.UTC)
    for minutes in (0, 5, 2):
        ChatLogFactory.create(session=session, user=owner, created_at=first + dt.timedelta(minutes=minutes))
    head = session_detail_for_user(session_id=session.pk, user=owner)
    assert head is not None
    found, count, latest = head.session, head.message_count, head.last_message_at
    stored = ChatSession.objects.get(pk=session.pk)
    assert (found.pk, found.user_id, found.title, found.created_at, found.updated_at) == (
        stored.pk, stored.user_id, "Card balances", stored.created_at, stored.updated_at,
    )  # fmt: skip
    assert (count, latest) == (3, first + dt.timedelta(minutes=5))
    assert session_detail_for_user(session_id=session.pk, user=other) is None
    assert session_detail_for_user(session_id=uuid.uuid4(), user=owner) is None
    empty = session_detail_for_user(session_id=ChatSessionFactory.create(user=owner).pk, user=owner)
    assert empty is not None and (empty.message_count, empty.last_message_at) == (0, None)


def test_session_rows_are_the_querysets_rows_json_as_stored_text(django_user_model):
    owner = django_user_model.objects.create(username="a")
    session = ChatSessionFactory.create(user=owner)
    other = ChatSessionFactory.create(user=owner)
    first = dt.datetime(2026, 11, 2, 9, 30, tzinfo=dt.UTC)
    for minutes in (3, 1, 2):
        ChatLogFactory.create(session=session, user=owner, created_at=first + dt.timedelta(minutes=minutes))
    ChatLogFactory.create(session=other, user=owner)
    rows = session_message_rows_fetched(session=session, fields=FIELDS)
    assert rows == list(session_message_rows(session=session, fields=FIELDS))
    assert [row[FIELDS.index("created_at")] for row in rows] == [first + dt.timedelta(minutes=m) for m in (1, 2, 3)]
    citations = rows[0][FIELDS.index("citations")]
    assert isinstance(citations, str) and citations.startswith("[")
    assert ChatLog.objects.filter(session=session).count() == 3


def test_session_page_is_the_querysets_page_with_its_counts(django_user_model):
    from chat.api.rendering import LIST_COLUMNS

    owner, other = django_user_model.objects.create(username="a"), django_user_model.objects.create(username="b")
    sessions = [ChatSessionFactory.create(user=owner) for _ in range(7)]
    ChatSessionFactory.create(user=other)
    for session, turns in zip(sessions, (3, 0, 1, 2, 0, 5, 1), strict=True):
        for _ in range(turns):
            ChatLogFactory.create(session=session, user=owner)
    fields = [name for name, _ in LIST_COLUMNS]
    for bottom, top in ((0, 50), (2, 5), (6, 9), (9, 12)):
        expected = list(
            sessions_with_message_counts(page=session_list_for_user(user=owner)[bottom:top]).values_list(*fields)
        )
        assert SessionListPages(owner).page(bottom, top, fields) == expected
    first = SessionListPages(owner).page(0, 50, fields)
    # Most recently active first (the factory's sessions are an hour apart): the counts by hand.
    assert [row[fields.index("message_count")] for row in first] == [1, 5, 0, 2, 1, 0, 3]


# --- the statements equal their querysets, whatever the rows (PostgreSQL: where the statements serve) ---------

_LAYOUT = st.lists(  # sessions of two users: (owner 0 or 1, minutes after a start for each of its turns)
    st.tuples(st.integers(0, 1), st.lists(st.integers(0, 600), max_size=4)), max_size=7
)


@pytest.mark.skipif(not hot_reads.available(), reason="the statements serve PostgreSQL only; SQLite runs the querysets")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=_LAYOUT, bottom=st.integers(0, 8), size=st.integers(1, 8))
def test_each_statement_is_its_queryset_on_any_rows(django_user_model, layout, bottom, size):
    from chat.api.rendering import LIST_COLUMNS

    ChatLog.objects.all().delete()
    ChatSession.objects.all().delete()
    users = [django_user_model.objects.get_or_create(username=name)[0] for name in ("prop-a", "prop-b")]
    start = dt.datetime(2026, 11, 2, 9, 30, tzinfo=dt.UTC)
    sessions = []
    for owner, minutes in layout:
        session = ChatSessionFactory.create(user=users[owner])
        sessions.append(session)
        for minute in minutes:
            ChatLogFactory.create(session=session, user=users[owner], created_at=start + dt.timedelta(minutes=minute))
    fields = [name for name, _ in LIST_COLUMNS]
    for user in users:
        assert hot_reads.session_count(user.pk) == session_list_for_user(user=user).count()
        page = session_list_for_user(user=user)[bottom : bottom + size]
        expected_page = list(sessions_with_message_counts(page=page).values_list(*fields))
        assert hot_reads.session_page(user.pk, bottom, bottom + size, fields) == expected_page
        for session in sessions:
            raw, orm = hot_reads.session_head(session.pk, user.pk), _session_head(session.pk, user.pk)
            assert (raw is None) == (orm is None)
            if raw is not None and orm is not None:
                assert (raw[0].pk, raw[0].title, raw[0].updated_at, raw[1], raw[2]) == (
                    orm[0].pk, orm[0].title, orm[0].updated_at, orm[1], orm[2],
                )  # fmt: skip
    for session in sessions:
        assert hot_reads.session_rows(session.pk, FIELDS) == list(session_message_rows(session=session, fields=FIELDS))
