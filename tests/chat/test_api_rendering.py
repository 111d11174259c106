"""The session detail body built from the stored JSON text (`chat.api.rendering`).

The reference is what the view served before: `ChatSessionDetailSerializer`
data through DRF's `JSONRenderer`. Bodies are compared parsed, with every
object as its list of (key, value) pairs, so key order counts too (both read
the same stored JSON: written order on SQLite, jsonb order on PostgreSQL).
"""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo
from typing import Any

import orjson
import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer

from chat.api.rendering import LIST_COLUMNS, datetime_converter, session_detail_json
from chat.api.serializers import ChatSessionDetailSerializer, ChatSessionListSerializer
from chat.models import ChatLog
from chat.selectors import session_list_for_user, session_message_rows, session_messages, sessions_with_message_counts
from tests.factories import ChatLogFactory, ChatSessionFactory

pytestmark = pytest.mark.django_db

ODD_CITATIONS = [
    {
        "source": "silvia://weather/austin",
        "title": "日本 💳 é\u0301",
        "cited_text": 'q"uo\\te\n\t\u0001',
        "target": {"kind": "weather", "city": "Austin"},
    },
    {"source": "s", "title": None, "cited_text": "c", "target": {"kind": "account"}},
    {"z": 1, "a": 2, "m": {"y": [1, {"b": 2, "a": 1}], "x": None}},
    {"floats": [1e-7, 0.1 + 0.2, 1.5e300, -2.5, 310.0, 0.0], "ints": [2**70, -(2**63), 0, 12345678901234567890]},
    {"flags": [True, False, None], "empty": [{}, [], ""], "nan_as_text": "NaN Infinity"},
    {"deep": [[[[[[[[[["bottom"]]]]]]]]]]},
]


def _pairs(body: bytes) -> Any:
    """The body parsed strictly (no NaN/Infinity), objects as (key, value) lists."""

    def refuse(name: str) -> object:
        raise ValueError(f"not JSON: {name}")

    return json.loads(body, object_pairs_hook=list, parse_constant=refuse)


def _serializer_body(session) -> bytes:
    """What the view served before `session_detail_json`."""
    session.messages = session_messages(session=session)
    return JSONRenderer().render(ChatSessionDetailSerializer(session).data)


def test_odd_stored_values_come_back_as_the_serializer_gave_them(token_client, maya):
    session = ChatSessionFactory.create(user=maya, title="Taxes 🧾 \u2028 2026")
    ChatLogFactory.create(
        session=session, citations=ODD_CITATIONS, inline_citations=[{"legacy": True, "start": 0, "end": 1}]
    )
    # Odd entries, as old or damaged rows may hold (a column that is not a
    # list at all is refused by the check constraints of migration 0003).
    ChatLogFactory.create(
        session=session, citations=['[{"source": "silvia://analysis"}]'], inline_citations=[{"kind": "odd"}, None, 7]
    )
    ChatLogFactory.create(
        session=session,
        user_message="line\u2028separator\u2029paragraph",
        response="ünïcödé",
        citations=[{"source": "s", "title": "t", "cited_text": "a\u2028b"}],
        inline_citations=[],
        created_at=dt.datetime(2026, 11, 30, 8, 1, 2, 34, tzinfo=dt.UTC),
    )

    response = token_client.get(f"/api/chat/sessions/{session.id}/")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert _pairs(response.content) == _pairs(_serializer_body(session))


@pytest.mark.parametrize("where", ["title", "user_message", "cited_text"])
def test_line_and_paragraph_separators_are_escaped_as_drf_does(maya, where):
    odd = "a\u2028b\u2029c"
    session = ChatSessionFactory.create(user=maya, title=odd if where == "title" else "t")
    ChatLogFactory.create(
        session=session,
        user_message=odd if where == "user_message" else "m",
        citations=[{"source": "s", "title": "t", "cited_text": odd if where == "cited_text" else "x"}],
    )

    body = session_detail_json(session=session).body

    assert "\u2028".encode() not in body and "\u2029".encode() not in body
    assert b"a\\u2028b\\u2029c" in body
    assert _pairs(body) == _pairs(_serializer_body(session))


def test_key_order_is_the_stored_order_on_sqlite(maya):
    if connection.vendor != "sqlite":
        pytest.skip("jsonb keeps its own key order; the serializer comparison covers PostgreSQL")
    log = ChatLogFactory.create(
        session__user=maya, citations=[{"z": 1, "a": 2, "target": {"provider": None, "kind": "account"}}]
    )

    message = _pairs(session_detail_json(session=log.session).body)[-1][1][0]  # ("messages", [message])

    assert dict(message)["citations"] == [[("z", 1), ("a", 2), ("target", [("provider", None), ("kind", "account")])]]


def test_dates_follow_drf_format_and_the_current_time_zone(token_client, maya, settings):
    settings.TIME_ZONE = "America/Chicago"
    session = ChatSessionFactory.create(user=maya, created_at=dt.datetime(2026, 7, 1, 12, tzinfo=dt.UTC))
    ChatLogFactory.create(session=session, created_at=dt.datetime(2026, 1, 2, 3, 4, 5, 600, tzinfo=dt.UTC))

    body = json.loads(token_client.get(f"/api/chat/sessions/{session.id}").content)

    assert body["created_at"] == "2026-07-01T07:00:00-05:00"
    assert body["messages"][0]["created_at"] == "2026-01-01T21:04:05.000600-06:00"
    assert _pairs(session_detail_json(session=session).body) == _pairs(_serializer_body(session))


def test_utc_dates_end_in_z(maya):
    log = ChatLogFactory.create(session__user=maya, created_at=dt.datetime(2026, 11, 30, 9, 0, 0, 5, tzinfo=dt.UTC))
    body = json.loads(session_detail_json(session=log.session).body)
    assert body["messages"][0]["created_at"] == "2026-11-30T09:00:00.000005Z"


def test_empty_session_has_no_messages(token_client, maya):
    session = ChatSessionFactory.create(user=maya)
    response = token_client.get(f"/api/chat/sessions/{session.id}/")
    assert response.status_code == 200
    assert _pairs(response.content) == _pairs(_serializer_body(session))
    assert response.json()["messages"] == []


def test_indented_json_is_still_honoured(token_client, maya):
    log = ChatLogFactory.create(session__user=maya)
    response = token_client.get(f"/api/chat/sessions/{log.session_id}/", HTTP_ACCEPT="application/json; indent=2")
    assert response.status_code == 200
    assert b'\n  "id": ' in response.content
    assert _pairs(response.content) == _pairs(_serializer_body(log.session))


def test_not_found_body_is_unchanged(token_client):
    response = token_client.get("/api/chat/sessions/00000000-0000-4000-8000-000000000000/")
    assert response.status_code == 404
    assert response.content == b'{"detail":"Not found."}'


def test_message_rows_hold_the_json_columns_as_text(maya):
    log = ChatLogFactory.create(session__user=maya, citations=ODD_CITATIONS)
    [(log_id, citations, inline)] = session_message_rows(
        session=log.session, fields=["id", "citations", "inline_citations"]
    )
    assert log_id == log.id
    # As the ORM decodes it (jsonb spells 1.5e300 with all its digits: an int once parsed).
    stored = ChatLog.objects.get(pk=log.pk)
    assert isinstance(citations, str) and json.loads(citations) == stored.citations
    assert json.loads(inline) == stored.inline_citations


def test_schema_still_describes_the_detail_with_the_serializer(client, db):
    schema = json.loads(client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content)
    detail = next(operations for path, operations in schema["paths"].items() if "{session_id}" in path)
    ok = detail["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/ChatSessionDetail"}
    assert "messages" in schema["components"]["schemas"]["ChatSessionDetail"]["properties"]


_ZONES = sorted(zoneinfo.available_timezones() & {"UTC", "Etc/UTC", "Europe/London", "America/Chicago", "Asia/Kolkata",
                                                  "America/St_Johns", "Australia/Lord_Howe", "Pacific/Chatham",
                                                  "Europe/Dublin", "Africa/Monrovia", "Asia/Kathmandu"})  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    value=st.datetimes(
        min_value=dt.datetime(1800, 1, 1),
        max_value=dt.datetime(2200, 1, 1),
        timezones=st.sampled_from([dt.UTC, *(zoneinfo.ZoneInfo(name) for name in _ZONES)]),
    ),
    current=st.sampled_from(_ZONES),
)
def test_the_fast_date_converter_writes_what_drf_writes(value, current):
    """`datetime_converter` + orjson (OPT_UTC_Z) against DRF's `DateTimeField.to_representation`, for any
    aware datetime and current time zone (old local mean times with second offsets included)."""
    field = serializers.DateTimeField()
    field.timezone = zoneinfo.ZoneInfo(current)
    expected = field.to_representation(value)
    got = orjson.loads(orjson.dumps(datetime_converter(field)(value), option=orjson.OPT_UTC_Z))
    assert got == expected


def test_list_columns_are_the_list_serializers_fields():
    """The list body reads an explicit column list: it must name the serializer's fields, in order."""
    fields = ChatSessionListSerializer().fields
    assert [name for name, _ in LIST_COLUMNS] == list(fields)
    for name, kind in LIST_COLUMNS:
        assert (kind == "datetime") == isinstance(fields[name], serializers.DateTimeField), name


def test_the_list_body_is_the_serializers(token_client, maya, settings):
    settings.TIME_ZONE = "America/Chicago"
    sessions = [
        ChatSessionFactory.create(user=maya, title=title, created_at=dt.datetime(2026, 1, n + 1, 5, tzinfo=dt.UTC))
        for n, title in enumerate(["a\u2028b", "日本 💳", ""])
    ]
    ChatLogFactory.create_batch(2, session=sessions[1])
    body = token_client.get("/api/chat/sessions/").content
    rows = sessions_with_message_counts(page=session_list_for_user(user=maya))
    expected = JSONRenderer().render(
        {"count": 3, "next": None, "previous": None, "results": ChatSessionListSerializer(rows, many=True).data}
    )
    assert _pairs(body) == _pairs(expected)
    assert b"\\u2028" in body and "\u2028".encode() not in body
