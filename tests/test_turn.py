"""The pure turn assembly (SPEC sections 6 and 7), no database."""
from __future__ import annotations

import pytest

from citations.turn import (
    AssistantEvent,
    ToolCallEvent,
    TurnRecordError,
    assemble_turn,
    parse_turn_record,
    utf16_length,
)
from tests.cases import golden_params, load_cases

TURNS = load_cases("turns.json")
BAD_TURNS = load_cases("bad_turns.json")

PORTFOLIO_SQL = ToolCallEvent("toolu_1", "execute_sql", {"query": "q"}, {"rows": [{"total": 1}]})


def _cite(source="silvia://your-portfolio", cited_text="total: 1", title="Your portfolio", kind="search_result_location"):
    return {"type": kind, "source": source, "title": title, "cited_text": cited_text}


def _step(*blocks):
    return AssistantEvent({"type": "message", "role": "assistant", "model": "m", "content": list(blocks)})


@pytest.mark.parametrize("case", golden_params(TURNS))
def test_golden_turn_assembles_as_expected(case):
    turn = parse_turn_record(case["record"])
    assembled = assemble_turn(turn.events)
    assert assembled.response == case["expect"]["response"]
    assert assembled.citations == case["expect"]["citations"]
    assert assembled.inline_citations == case["expect"]["inline_citations"]


@pytest.mark.parametrize("case", golden_params(BAD_TURNS))
def test_golden_bad_turn_names_its_path(case):
    with pytest.raises(TurnRecordError) as raised:
        parse_turn_record(case["record"])
    assert raised.value.path == case["path"]


@pytest.mark.parametrize(
    ("text", "units"),
    [("", 0), ("abc", 3), ("é", 1), ("💳", 2), ("a💳b📈", 6), ("日本", 2)],
)
def test_utf16_length_counts_code_units(text, units):
    assert utf16_length(text) == units
    assert utf16_length(text) == len(text.encode("utf-16-le")) // 2


def test_steps_join_with_a_blank_line_and_steps_without_text_add_nothing():
    tool_only = AssistantEvent({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]})
    assembled = assemble_turn(
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
    assembled = assemble_turn(
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
    assert assembled.citations == [{"source": "silvia://your-portfolio", "title": "Your portfolio", "cited_text": "total: 1"}]


@pytest.mark.parametrize("citations", [None, [], "absent"])
def test_no_citations_in_any_spelling(citations):
    block = {"type": "text", "text": "plain"}
    if citations != "absent":
        block["citations"] = citations
    assembled = assemble_turn([_step(block)])
    assert assembled.response == "plain" and assembled.citations == [] and assembled.inline_citations == []


def test_other_citation_types_are_skipped_and_null_title_kept():
    assembled = assemble_turn(
        [
            PORTFOLIO_SQL,
            _step(
                {
                    "type": "text",
                    "text": "x",
                    "citations": [
                        {"type": "char_location", "cited_text": "c", "document_index": 0, "start_char_index": 0, "end_char_index": 1},
                        _cite(title=None),
                    ],
                }
            ),
        ]
    )
    assert assembled.inline_citations == [
        {"source": "silvia://your-portfolio", "title": None, "cited_text": "total: 1", "start": 0, "end": 1, "target": {"kind": "portfolio"}}
    ]


def test_model_is_the_last_steps():
    first = _step({"type": "text", "text": "a"})
    last = AssistantEvent({"role": "assistant", "model": "claude-opus-4-1", "content": [{"type": "text", "text": "b"}]})
    assert assemble_turn([first, last]).model == "claude-opus-4-1"
    assert assemble_turn([]).model == "" and assemble_turn([]).response == ""


def test_user_is_not_required_when_the_caller_gives_it():
    record = {"session": {"id": "11111111-2222-4333-8444-555555555555"}, "prompt_version": "legacy", "user_message": "", "events": []}
    with pytest.raises(TurnRecordError) as raised:
        parse_turn_record(record)
    assert raised.value.path == "user"
    assert parse_turn_record(record, user_given=True).user is None
