"""What a turn record must hold to be stored (docs/turns.md), no database: text PostgreSQL can store (found
with its path, however deep), times storable in UTC, ids in their one spelling, reader sidecar fields passed
through; and the property that any corrupted record is refused with a path or assembled."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citations.assembler import assemble_record
from citations.turn import TurnRecordError, parse_turn_record
from citations.utf16 import utf16_length
from tests.citations.turn_support import _cite, _step


def _record_with(**changes):
    record: dict[str, Any] = {
        "session": {"id": "11111111-2222-4333-8444-555555555555"},
        "user": "maya",
        "prompt_version": "v5",
        "user_message": "hi",
        "events": [
            {
                "type": "tool_call",
                "id": "t",
                "name": "execute_python",
                "input": {"code": "print(1)"},
                "output": {"stdout": "1\n", "stderr": ""},
            },
            _step(
                {"type": "text", "text": "One.", "citations": [_cite(source="silvia://analysis", cited_text="1")]}
            ).message,
        ],
    }
    record["events"][1] = {"type": "assistant", "message": dict(record["events"][1])}
    record.update(changes)
    return record


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"user_message": "a\x00b"}, "user_message", "NUL"),
        ({"user_message": "bad \ud800 surrogate"}, "user_message", "surrogate"),
        ({"session": {"id": "11111111-2222-4333-8444-555555555555", "title": "x\x00"}}, "session.title", "NUL"),
        ({"user": "ma\x00ya"}, "user", "NUL"),
        ({"extra": {"k\x00": 1}}, "extra.k\x00", "key contains a NUL"),
    ],
)
def test_text_postgresql_cannot_store_is_refused_with_its_path(change, path, words):
    with pytest.raises(TurnRecordError) as raised:
        parse_turn_record(_record_with(**change))
    assert raised.value.path == path
    assert words in raised.value.message


def test_unstorable_text_deep_in_a_citation_names_its_path():
    record = _record_with()
    record["events"][1]["message"]["content"][0]["citations"][0]["cited_text"] = "\udfff"
    with pytest.raises(TurnRecordError) as raised:
        parse_turn_record(record)
    assert raised.value.path == "events[1].message.content[0].citations[0].cited_text"


@pytest.mark.parametrize(
    ("created_at", "error"),
    [
        ("9999-12-31T23:59:59-05:00", "out of range"),
        ("0001-01-01T00:00:00+05:00", "out of range"),
        ("2026-13-01T00:00:00Z", "not an ISO 8601"),
    ],
)
def test_created_at_must_be_storable_in_utc(created_at, error):
    with pytest.raises(TurnRecordError) as raised:
        parse_turn_record(_record_with(created_at=created_at))
    assert raised.value.path == "created_at" and error in raised.value.message


def test_created_at_is_converted_to_utc():
    import datetime as dt

    turn = parse_turn_record(_record_with(created_at="2026-11-20T10:00:00-05:00"))
    assert turn.created_at == dt.datetime(2026, 11, 20, 15, tzinfo=dt.UTC)
    assert turn.created_at.utcoffset() == dt.timedelta(0)


@pytest.mark.parametrize(
    "spelling",
    [
        "{11111111-2222-4333-8444-555555555555}",
        "urn:uuid:11111111-2222-4333-8444-555555555555",
        "11111111222243338444555555555555",
        "11111111-2222-4333-8444-555555555555\n",
    ],
)
def test_only_the_canonical_uuid_spelling_is_an_id(spelling):
    with pytest.raises(TurnRecordError) as raised:
        parse_turn_record(_record_with(id=spelling))
    assert raised.value.path == "id"


def test_uppercase_uuid_is_the_same_id():
    turn = parse_turn_record(_record_with(id="AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE"))
    assert str(turn.id) == "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"


def test_reader_sidecar_fields_are_passed_through_not_checked():
    record = _record_with()
    record["events"].insert(
        0,
        {
            "type": "tool_call",
            "id": "r",
            "name": "read_tax_authority",
            "input": {"path": "irs/a.md"},
            "output": {"path": "irs/a.md", "content": "text", "meta": {"title": 5, "source_url": ["x"]}},
        },
    )
    assert len(parse_turn_record(record).events) == 3


def test_a_literal_backslash_u0000_is_ordinary_text():
    turn = parse_turn_record(_record_with(user_message="type \\u0000 to mean NUL"))
    assert turn.user_message == "type \\u0000 to mean NUL"


def test_unstorable_text_is_found_beside_values_the_fast_check_cannot_encode():
    record = _record_with()
    record["events"][0] = {
        "type": "tool_call",
        "id": "t",
        "name": "execute_sql",
        "input": {"query": "q"},
        "output": {"rows": [{"big": 2**80, "account_name": "Check\x00ing"}]},
    }
    with pytest.raises(TurnRecordError) as raised:
        parse_turn_record(record)
    assert raised.value.path == "events[0].output.rows[0].account_name"


# --- property: a record is either refused with a path or assembled --------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), replacement=_json)
def test_any_corrupted_record_is_refused_with_a_path_or_assembled(data, replacement):
    record = _record_with()
    paths = [p for p in _paths(record) if p]
    path = data.draw(st.sampled_from(paths))
    target = record
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = replacement
    try:
        turn = parse_turn_record(record)
    except TurnRecordError as error:
        assert error.path and error.message
        return
    assembled = assemble_record(turn.events)
    assert isinstance(assembled.response, str)
    for citation in assembled.inline_citations:
        assert 0 <= citation["start"] <= citation["end"] <= utf16_length(assembled.response)
