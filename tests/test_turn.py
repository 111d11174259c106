"""Turn records and what they store (docs/turns.md): validation and the assembler fed whole blocks, no database."""

from __future__ import annotations

from typing import Any

import pytest

from citations.assembler import assemble_record
from citations.turn import AssistantEvent, ToolCallEvent, TurnRecordError, parse_turn_record
from citations.utf16 import utf16_length
from tests.cases import golden_params, load_cases

TURNS = load_cases("turns.json")
BAD_TURNS = load_cases("bad_turns.json")

PORTFOLIO_SQL = ToolCallEvent("toolu_1", "execute_sql", {"query": "q"}, {"rows": [{"total": 1}]})


def _cite(
    source="silvia://your-portfolio", cited_text="total: 1", title="Your portfolio", kind="search_result_location"
):
    return {"type": kind, "source": source, "title": title, "cited_text": cited_text}


def _step(*blocks):
    return AssistantEvent({"type": "message", "role": "assistant", "model": "m", "content": list(blocks)})


@pytest.mark.parametrize("case", golden_params(TURNS))
def test_golden_turn_assembles_as_expected(case):
    turn = parse_turn_record(case["record"])
    assembled = assemble_record(turn.events)
    assert assembled.response == case["expect"]["response"]
    assert assembled.citations == case["expect"]["citations"]
    assert assembled.inline_citations == case["expect"]["inline_citations"]


@pytest.mark.parametrize("case", golden_params(BAD_TURNS))
def test_golden_bad_turn_names_its_path(case):
    with pytest.raises(TurnRecordError) as raised:
        parse_turn_record(case["record"])
    assert raised.value.path == case["path"]


def _minimal_record() -> dict[str, Any]:
    return {
        "session": {"id": "d93ada3e-af5f-4e4e-823c-781fec71f26d"},
        "user": "maya",
        "prompt_version": "v5",
        "user_message": "How much do I owe?",
        "events": [],
    }


@pytest.mark.parametrize(
    ("field", "missing", "null"),
    [
        ("user_message", "missing (expected a string)", "expected a string, got null"),
        ("events", "missing (expected a list)", "expected a list, got null"),
        ("user", "missing (expected a username string)", "expected a username string, got null"),
        ("session", "missing (expected an object with an 'id')", "expected an object with an 'id', got null"),
        ("prompt_version", "missing (expected 'v5' or 'legacy')", "expected 'v5' or 'legacy', got None"),
        ("session.id", "missing (expected a UUID string)", "expected a UUID string, got null"),
    ],
)
def test_a_required_field_that_is_not_there_says_missing_not_null(field, missing, null):
    for value, message in ((None, null), (_MISSING, missing)):
        record = _minimal_record()
        holder, key = (record["session"], "id") if field == "session.id" else (record, field)
        if value is _MISSING:
            del holder[key]
        else:
            holder[key] = value
        with pytest.raises(TurnRecordError) as raised:
            parse_turn_record(record)
        assert (raised.value.path, raised.value.message) == (field, message)
    assert parse_turn_record(_minimal_record()).user_message == "How much do I owe?"


_MISSING = object()


@pytest.mark.parametrize(
    ("text", "units"),
    [("", 0), ("abc", 3), ("é", 1), ("💳", 2), ("a💳b📈", 6), ("日本", 2)],
)
def test_utf16_length_counts_code_units(text, units):
    assert utf16_length(text) == units
    assert utf16_length(text) == len(text.encode("utf-16-le")) // 2


def test_steps_join_with_a_blank_line_and_steps_without_text_add_nothing():
    tool_only = AssistantEvent(
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]}
    )
    assembled = assemble_record(
        [
            _step({"type": "text", "text": "One"}),
            tool_only,
            PORTFOLIO_SQL,
            _step({"type": "text", "text": ""}, {"type": "text", "text": "Two", "citations": [_cite()]}),
        ]
    )
    assert assembled.response == "One\n\nTwo"
    assert [(c["start"], c["end"]) for c in assembled.inline_citations] == [(5, 8)]
    assert assembled.response[5:8] == "Two"


def test_citation_before_its_tool_result_is_untyped_and_after_it_is_typed():
    assembled = assemble_record(
        [
            _step({"type": "text", "text": "a", "citations": [_cite()]}),
            PORTFOLIO_SQL,
            _step({"type": "text", "text": "b", "citations": [_cite()]}),
        ]
    )
    first, second = assembled.inline_citations
    assert "target" not in first
    assert second["target"] == {"kind": "portfolio"}
    # Same (source, cited_text): one summary entry, with the first citation's target (none).
    assert assembled.citations == [
        {"source": "silvia://your-portfolio", "title": "Your portfolio", "cited_text": "total: 1"}
    ]


@pytest.mark.parametrize("citations", [None, [], "absent"])
def test_no_citations_in_any_spelling(citations):
    block = {"type": "text", "text": "plain"}
    if citations != "absent":
        block["citations"] = citations
    assembled = assemble_record([_step(block)])
    assert assembled.response == "plain" and assembled.citations == [] and assembled.inline_citations == []


def test_other_citation_types_are_skipped_and_null_title_kept():
    assembled = assemble_record(
        [
            PORTFOLIO_SQL,
            _step(
                {
                    "type": "text",
                    "text": "x",
                    "citations": [
                        {
                            "type": "char_location",
                            "cited_text": "c",
                            "document_index": 0,
                            "start_char_index": 0,
                            "end_char_index": 1,
                        },
                        _cite(title=None),
                    ],
                }
            ),
        ]
    )
    assert assembled.inline_citations == [
        {
            "source": "silvia://your-portfolio",
            "title": None,
            "cited_text": "total: 1",
            "start": 0,
            "end": 1,
            "target": {"kind": "portfolio"},
        }
    ]


def test_model_is_the_last_steps():
    first = _step({"type": "text", "text": "a"})
    last = AssistantEvent({"role": "assistant", "model": "claude-opus-4-1", "content": [{"type": "text", "text": "b"}]})
    assert assemble_record([first, last]).model == "claude-opus-4-1"
    assert assemble_record([]).model == "" and assemble_record([]).response == ""


def test_user_is_not_required_when_the_caller_gives_it():
    record = {
        "session": {"id": "11111111-2222-4333-8444-555555555555"},
        "prompt_version": "legacy",
        "user_message": "",
        "events": [],
    }
    with pytest.raises(TurnRecordError) as raised:
        parse_turn_record(record)
    assert raised.value.path == "user"
    assert parse_turn_record(record, user_given=True).user is None


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

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

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
