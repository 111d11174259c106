"""Turn records and what they store (docs/turns.md), no database: the golden turns assembled as expected and
the bad ones refused naming their path; missing fields; UTF-16 lengths; steps joined; citations typed after
their tool result, skipped or kept; the model and the user."""

from __future__ import annotations

from typing import Any

import pytest

from citations.assembler import assemble_record
from citations.turn import AssistantEvent, ToolCallEvent, TurnRecordError, parse_turn_record
from citations.utf16 import utf16_length
from tests.cases import golden_params, load_cases, without_support
from tests.citations.turn_support import _cite, _step

TURNS = load_cases("turns.json")
BAD_TURNS = load_cases("bad_turns.json")

PORTFOLIO_SQL = ToolCallEvent("toolu_1", "execute_sql", {"query": "q"}, {"rows": [{"total": 1}]})


@pytest.mark.parametrize("case", golden_params(TURNS))
def test_golden_turn_assembles_as_expected(case):
    turn = parse_turn_record(case["record"])
    assembled = assemble_record(turn.events)
    assert assembled.response == case["expect"]["response"]
    assert assembled.citations == case["expect"]["citations"]
    assert without_support(assembled.inline_citations) == case["expect"]["inline_citations"]


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
    assert without_support(assembled.inline_citations) == [
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
