"""`chat.hot_reads`: each statement gives what its queryset gives, on the same rows (both databases: on
SQLite the querysets themselves run)."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from chat import hot_reads
from chat.api.rendering import MESSAGE_COLUMNS
from chat.models import ChatLog, ChatSession
from chat.selectors import session_message_rows
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
    assert (hot_reads.session_count(mine.pk), hot_reads.session_count(theirs.pk)) == (3, 1)
    assert hot_reads.session_count(mine.pk + theirs.pk + 1) == 0


def test_session_head_is_the_row_its_count_and_latest_turn(django_user_model):
    owner, other = django_user_model.objects.create(username="a"), django_user_model.objects.create(username="b")
    session = ChatSessionFactory.create(user=owner, title="Card balances")
    first = dt.datetime(2026, 11, 2, 9, 30, 1, 123456, tzinfo=dt.UTC)
    for minutes in (0, 5, 2):
        ChatLogFactory.create(session=session, user=owner, created_at=first + dt.timedelta(minutes=minutes))
    head = hot_reads.session_head(session.pk, owner.pk)
    assert head is not None
    found, count, latest = head
    stored = ChatSession.objects.get(pk=session.pk)
    assert (found.pk, found.user_id, found.title, found.created_at, found.updated_at) == (
        stored.pk, stored.user_id, "Card balances", stored.created_at, stored.updated_at,
    )  # fmt: skip
    assert (count, latest) == (3, first + dt.timedelta(minutes=5))
    assert hot_reads.session_head(session.pk, other.pk) is None
    assert hot_reads.session_head(uuid.uuid4(), owner.pk) is None
    empty = ChatSessionFactory.create(user=owner)
    assert (hot_reads.session_head(empty.pk, owner.pk) or (None,))[1:] == (0, None)


def test_session_rows_are_the_querysets_rows_json_as_stored_text(django_user_model):
    owner = django_user_model.objects.create(username="a")
    session = ChatSessionFactory.create(user=owner)
    other = ChatSessionFactory.create(user=owner)
    first = dt.datetime(2026, 11, 2, 9, 30, tzinfo=dt.UTC)
    for minutes in (3, 1, 2):
        ChatLogFactory.create(session=session, user=owner, created_at=first + dt.timedelta(minutes=minutes))
    ChatLogFactory.create(session=other, user=owner)
    rows = hot_reads.session_rows(session.pk, FIELDS)
    assert rows == list(session_message_rows(session=session, fields=FIELDS))
    assert [row[FIELDS.index("created_at")] for row in rows] == [first + dt.timedelta(minutes=m) for m in (1, 2, 3)]
    citations = rows[0][FIELDS.index("citations")]
    assert isinstance(citations, str) and citations.startswith("[")
    assert ChatLog.objects.filter(session=session).count() == 3


def test_session_page_is_the_querysets_page_with_its_counts(django_user_model):
    from chat.api.rendering import LIST_COLUMNS
    from chat.selectors import session_list_for_user, sessions_with_message_counts

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
        assert hot_reads.session_page(owner.pk, bottom, top, fields) == expected
    first = hot_reads.session_page(owner.pk, 0, 50, fields)
    # Most recently active first (the factory's sessions are an hour apart): the counts by hand.
    assert [row[fields.index("message_count")] for row in first] == [1, 5, 0, 2, 1, 0, 3]
