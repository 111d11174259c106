"""Support (SPEC 15, docs/support.md) through the service paths on the database: `record_turn`, `import_turns`
and GET give the support cases' hand-computed rows; GET serves a stored support raw; the backfill adds none.
Runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import io
import json
import uuid

import pytest
from django.core.management import call_command

from chat.models import ChatLog
from chat.services import record_turn
from tests.cases import golden_params
from tests.factories import ChatLogFactory
from tests.support_turns import CASES

pytestmark = pytest.mark.django_db


def _stored(log_id):
    log = ChatLog.objects.get(pk=log_id)  # read back from the database
    return {"response": log.response, "citations": log.citations, "inline_citations": log.inline_citations}


@pytest.mark.parametrize("case", golden_params(CASES))
def test_record_turn_stores_the_hand_computed_support(case, maya):
    log = record_turn(case["record"])
    assert _stored(log.pk) == case["expect"]


def test_import_turns_stores_the_same_rows_and_get_serves_them_raw(tmp_path, maya, token_client):
    path = tmp_path / "support.json"
    path.write_text(json.dumps([case["record"] for case in CASES]), encoding="utf-8")
    call_command("import_turns", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    for case in CASES:
        assert _stored(case["record"]["id"]) == case["expect"]
    session = CASES[0]["record"]["session"]["id"]
    body = token_client.get(f"/api/chat/sessions/{session}/").json()
    by_id = {message["id"]: message for message in body["messages"]}
    for case in CASES:
        message = by_id[case["record"]["id"]]
        assert message["inline_citations"] == case["expect"]["inline_citations"]
        assert message["citations"] == case["expect"]["citations"]  # the summary: no support


def test_get_serves_a_stored_support_untouched_even_malformed(maya, token_client):
    odd = [
        {"source": "s", "title": "t", "cited_text": "c", "start": 0, "end": 1, "support": {"status": "later"}},
        {"source": "s", "title": "t", "cited_text": "c", "start": 0, "end": 1, "support": "supported"},
    ]
    log = ChatLogFactory.create(session__user=maya, inline_citations=[])
    ChatLog.objects.filter(pk=log.pk).update(inline_citations=odd)  # as another writer would, not the service
    body = token_client.get(f"/api/chat/sessions/{log.session_id}/").json()
    assert body["messages"][0]["inline_citations"] == odd


def test_the_backfill_adds_no_support_to_old_rows(maya):
    old = [{"source": "silvia://your-portfolio", "title": "Your portfolio", "cited_text": "total: 1"}]
    log = ChatLogFactory.create(
        id=uuid.uuid4(), user=maya, citations=old, inline_citations=[{**old[0], "start": 0, "end": 1}]
    )
    call_command("backfill_citation_targets", stdout=io.StringIO(), stderr=io.StringIO())
    log.refresh_from_db()
    assert log.inline_citations == [{**old[0], "start": 0, "end": 1, "target": {"kind": "portfolio"}}]
