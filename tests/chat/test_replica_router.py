"""chat.replica in process, on either database, with no replica configured: what each write counts and
where each read would go (tests/chat/test_replica.py runs a real replica)."""

from __future__ import annotations

import copy

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import DEFAULT_DB_ALIAS
from django.http import HttpResponse
from django.test import RequestFactory

import chat.replica
from chat.models import ChatLog, ChatSession, UserWriteMark
from chat.replica import REPLICA, ReplicaRouter, remember_write_count, replica_reads
from chat.services import TurnRecordError, record_turn
from finance.models import Account
from live.models import LiveTurn
from tests.chat.test_services import _minimal_record

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_reads_left():
    yield
    chat.replica._reads.set(None)  # what the next request's middleware does


def test_each_turn_stored_counts_one_write_of_its_user_in_its_transaction(maya, other_user):
    record_turn(_minimal_record())
    record_turn(_minimal_record(id="6e4b0f2a-54b3-4c67-9a0f-4a9ed1f1d6f1"))
    record_turn(_minimal_record(id="6e4b0f2a-54b3-4c67-9a0f-4a9ed1f1d6f1"))  # stored already: skipped
    assert UserWriteMark.objects.get(user=maya).seq == 2
    theirs = copy.deepcopy(_minimal_record(id="9c1f7d6e-2b1a-4c3d-8e9f-0a1b2c3d4e5f"))
    with pytest.raises(TurnRecordError):
        record_turn(theirs, user=other_user)  # the session is maya's: refused, nothing counted
    assert not UserWriteMark.objects.filter(user=other_user).exists()


def _request(method: str, user) -> None:
    request = getattr(RequestFactory(), method.lower())("/api/chat/sessions/")
    request.user = user
    replica_reads(lambda request: HttpResponse())(request)  # sets this request's reads, as the middleware does


def test_where_reads_go(maya):
    router = ReplicaRouter()
    _request("GET", maya)
    remember_write_count(maya.pk, 0)  # never wrote: the replica has all of it
    assert router.db_for_read(ChatSession) == router.db_for_read(ChatLog) == router.db_for_read(Account) == REPLICA
    assert router.db_for_read(LiveTurn) == DEFAULT_DB_ALIAS  # the streams' event log: the primary's
    assert router.db_for_write(ChatSession) == DEFAULT_DB_ALIAS
    for method in ("POST", "DELETE", "PUT"):
        _request(method, maya)
        assert router.db_for_read(ChatSession) == DEFAULT_DB_ALIAS
    _request("GET", AnonymousUser())  # before authentication: the primary, and no choice kept
    assert router.db_for_read(ChatSession) == DEFAULT_DB_ALIAS
    assert router.allow_migrate(DEFAULT_DB_ALIAS, "chat") and not router.allow_migrate(REPLICA, "chat")
