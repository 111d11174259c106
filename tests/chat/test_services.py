"""Support (SPEC 15, docs/support.md) through the service paths on the database: `record_turn`, `import_turns`
and GET give the support cases' hand-computed rows; GET serves a stored support raw; the backfill adds none.
Runs on SQLite and on PostgreSQL.

record_turn on the database (docs/turns.md), with the golden turn
cases; runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import copy
import datetime as dt
import io
import json
import uuid
from hashlib import sha256

import pytest
from django.core.management import call_command

from chat.models import ChatLog, ChatSession
from chat.services import TurnRecordError, record_turn, save_turn
from tests.cases import golden_params, load_cases, without_support
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


TURNS = load_cases("turns.json")
BAD_TURNS = load_cases("bad_turns.json")


def _minimal_record(**overrides):
    record = {
        "session": {"id": "11111111-2222-4333-8444-555555555555", "title": "Hello"},
        "user": "maya",
        "prompt_version": "v5",
        "user_message": "hi",
        "events": [
            {
                "type": "tool_call",
                "id": "toolu_1",
                "name": "execute_sql",
                "input": {"query": "SELECT SUM(balance) AS total FROM account_details"},
                "output": {"rows": [{"total": 10}]},
            },
            {
                "type": "assistant",
                "message": {
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [
                        {"type": "text", "text": "You have "},
                        {
                            "type": "text",
                            "text": "$10",
                            "citations": [
                                {
                                    "type": "search_result_location",
                                    "source": "silvia://your-portfolio",
                                    "title": "Your portfolio",
                                    "cited_text": "total: 10",
                                    "search_result_index": 0,
                                    "start_block_index": 0,
                                    "end_block_index": 1,
                                }
                            ],
                        },
                    ],
                    "stop_reason": "end_turn",
                },
            },
        ],
    }
    record.update(overrides)
    return record


@pytest.mark.parametrize("case", golden_params(TURNS))
def test_turn_case_is_stored_as_expected(case, maya):
    log = record_turn(case["record"])

    stored = ChatLog.objects.get(pk=log.pk)  # read back from the database
    assert stored.response == case["expect"]["response"]
    assert stored.citations == case["expect"]["citations"]
    assert without_support(stored.inline_citations) == case["expect"]["inline_citations"]
    assert str(stored.session_id) == case["record"]["session"]["id"]
    assert stored.user == maya
    assert stored.prompt_version == case["record"]["prompt_version"]


def test_all_turn_cases_share_their_session_in_order(maya):
    for case in TURNS:
        record_turn(case["record"])
    by_session: dict[uuid.UUID, list[str]] = {}
    for case in TURNS:
        by_session.setdefault(uuid.UUID(case["record"]["session"]["id"]), []).append(case["record"]["id"])
    for session_id, ids in by_session.items():
        stored = list(ChatLog.objects.filter(session_id=session_id).values_list("id", flat=True))
        assert [str(i) for i in stored] == ids


@pytest.mark.parametrize("case", golden_params(BAD_TURNS))
def test_bad_turn_case_is_refused_whole(case, maya):
    with pytest.raises(TurnRecordError) as raised:
        record_turn(case["record"])
    assert raised.value.path == case["path"]
    assert case["path"] in str(raised.value)
    assert ChatSession.objects.count() == 0
    assert ChatLog.objects.count() == 0


def test_record_with_a_stored_id_is_skipped_not_duplicated(maya):
    record = _minimal_record(id="aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee")
    first = save_turn(record)
    changed = copy.deepcopy(record)
    changed["user_message"] = "changed"
    second = save_turn(changed)

    assert first.created and not second.created
    assert second.log.pk == first.log.pk
    assert ChatLog.objects.count() == 1
    assert ChatLog.objects.get().user_message == "hi"


def test_session_of_another_user_is_refused_and_nothing_saved(maya, other_user):
    record_turn(_minimal_record(user="sam"))
    with pytest.raises(TurnRecordError) as raised:
        record_turn(_minimal_record())
    assert raised.value.path == "session.id"
    assert "another user" in raised.value.message
    assert ChatLog.objects.filter(user=maya).count() == 0


def test_turn_id_of_another_user_is_refused(maya, other_user):
    record_turn(_minimal_record(user="sam", id="aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"))
    record = _minimal_record(id="aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee")
    record["session"]["id"] = str(uuid.uuid4())
    with pytest.raises(TurnRecordError) as raised:
        record_turn(record)
    assert raised.value.path == "id"
    assert ChatSession.objects.filter(user=maya).count() == 0


def test_unknown_user_is_refused(db):
    with pytest.raises(TurnRecordError) as raised:
        record_turn(_minimal_record(user="nobody"))
    assert raised.value.path == "user"
    assert ChatSession.objects.count() == 0


def test_caller_given_user_overrides_the_record(maya, other_user):
    record = _minimal_record(user="not-a-user")
    log = record_turn(record, user=other_user)
    assert log.user == other_user and log.session.user == other_user


def test_minimal_record_is_typed_and_timestamps_default_to_now(maya):
    before = dt.datetime.now(dt.UTC)
    log = record_turn(_minimal_record())
    assert log.response == "You have $10"
    assert log.inline_citations == [
        {
            "source": "silvia://your-portfolio",
            "title": "Your portfolio",
            "cited_text": "total: 10",
            "start": 9,
            "end": 12,
            "target": {"kind": "portfolio"},
            # "$10" is the row's 10; the digest is of the block's one text (docs/support.md).
            "support": {"status": "supported", "unmatched": [], "digest": "sha256:" + sha256(b"total: 10").hexdigest()},
        }
    ]
    assert log.model == "claude-sonnet-4-5-20250929"
    assert log.created_at >= before
    assert log.session.title == "Hello"


def test_session_span_widens_with_its_turns(maya):
    later = _minimal_record(created_at="2026-11-20T10:00:00Z")
    earlier = _minimal_record(created_at="2026-11-19T10:00:00+00:00")
    earlier["session"].pop("title")
    record_turn(later)
    record_turn(earlier)
    session = ChatSession.objects.get()
    assert session.created_at == dt.datetime(2026, 11, 19, 10, tzinfo=dt.UTC)
    assert session.updated_at == dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC)
    assert session.title == "Hello"


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda r: r.update(user_message=5), "user_message"),
        (lambda r: r.update(prompt_version="v6"), "prompt_version"),
        (lambda r: r.update(created_at="yesterday"), "created_at"),
        (lambda r: r.update(id="not-a-uuid"), "id"),
        (lambda r: r["session"].update(id="nope"), "session.id"),
        (lambda r: r.pop("session"), "session"),
        (lambda r: r["events"].append({"type": "thinking"}), "events[2].type"),
        (lambda r: r["events"][0].update(output={"rows": [1]}), "events[0].output.rows[0]"),
        (lambda r: r["events"][0].update(name="execute_python", output={"stdout": None}), "events[0].output.stdout"),
        (
            lambda r: r["events"][0].update(name="search_web", output={"results": [{"url": 3}]}),
            "events[0].output.results[0].url",
        ),
        (
            lambda r: r["events"][0].update(name="read_tax_authority", output={"content": "x"}, input={}),
            "events[0].input.path",
        ),
        (lambda r: r["events"][1]["message"].update(content="text"), "events[1].message.content"),
        (
            lambda r: r["events"][1]["message"]["content"][1]["citations"][0].pop("cited_text"),
            "events[1].message.content[1].citations[0].cited_text",
        ),
        (
            lambda r: r["events"][1]["message"]["content"][1].update(citations={}),
            "events[1].message.content[1].citations",
        ),
    ],
)
def test_bad_record_names_the_json_path(maya, mutate, path):
    record = _minimal_record()
    mutate(record)
    with pytest.raises(TurnRecordError) as raised:
        record_turn(record)
    assert raised.value.path == path
    assert ChatLog.objects.count() == 0 and ChatSession.objects.count() == 0


def test_record_that_is_not_an_object_is_refused(maya):
    with pytest.raises(TurnRecordError) as raised:
        record_turn(["not", "a", "record"])
    assert raised.value.path == "record"


def test_limits_apply_to_every_saved_turn_and_name_the_setting(maya, settings):
    settings.TURN_MAX_TEXT_CHARS = 5
    record = _minimal_record()
    record["user_message"] = "123456"
    with pytest.raises(TurnRecordError) as raised:
        record_turn(record)
    assert str(raised.value) == "user_message: 6 characters, over the limit of 5 (TURN_MAX_TEXT_CHARS)"
    assert ChatLog.objects.count() == 0 and ChatSession.objects.count() == 0
