"""Live turns (docs/live.md, issue 8), real SDK -> recorded model over HTTP, events == GET == an import: what a
turn streams and stores (steps and tools, pooled and untyped citations, UTF-16 spans, citation types counted
not stored) and what it sends the model (a text-only history, the legacy prompt)."""

from __future__ import annotations

from hashlib import sha256
from pathlib import Path

import pytest

from live.models import LiveTurn, LiveTurnStatus
from tests.live import live_turns_support
from tests.live.live_turns_support import CARDS, SCRIPTED, check_events_equal_get, post_turn, run_turn
from tests.live_support import cite, parse_sse, script, step, text, tool_use, wait_for_turns

#: maya's API client (tests/live/live_turns_support.py), bound here: it replaces pytest-django's `client`
#: for this module only.
client = live_turns_support.client


pytestmark = pytest.mark.django_db(transaction=True)


CHASE = "silvia://credit-card-corpus/chase/sapphire-preferred/pricing.md"
CHASE_FILE = (
    Path(__file__).resolve().parents[2] / "examples/corpus/credit-card-corpus/chase/sapphire-preferred/pricing.md"
)


def test_two_steps_with_a_tool_between_them(client, recorded_model):
    session_id, events = run_turn(
        client,
        recorded_model,
        step(
            text("Let me check the card terms."),
            tool_use("toolu_1", "read_credit_card_document", {"path": "chase/sapphire-preferred/pricing.md"}),
        ),
        step(
            text("The annual fee is $95.", cite(CHASE, "- Annual fee: $95", "Sapphire Preferred pricing and terms")),
            text(" Purchases cost 20.24% to 27.24%."),
        ),
    )
    stored = check_events_equal_get(client, session_id, events)
    assert (
        stored["response"] == "Let me check the card terms.\n\nThe annual fee is $95. Purchases cost 20.24% to 27.24%."
    )
    assert stored["inline_citations"] == [
        {
            "source": CHASE,
            "title": "Sapphire Preferred pricing and terms",
            "cited_text": "- Annual fee: $95",
            "start": 30,
            "end": 52,
            "target": {"kind": "card_document", "url": None},
            # "$95" is the document's; the digest is of the document as read (docs/support.md).
            "support": {
                "status": "supported",
                "unmatched": [],
                "digest": f"sha256:{sha256(CHASE_FILE.read_bytes()).hexdigest()}",
            },
        }
    ]
    # The model saw the tool result as a search_result block with citations on.
    tool_result = recorded_model.requests[1]["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and tool_result["content"][0]["type"] == "search_result"
    assert tool_result["content"][0]["source"] == CHASE and tool_result["content"][0]["citations"] == {"enabled": True}
    assert events[-1][2]["skipped_citations"] == {}
    assert LiveTurn.objects.get().status == LiveTurnStatus.DONE and LiveTurn.objects.get().checkpoint is None


def test_pooled_account_label(client, recorded_model):
    session_id, events = run_turn(
        client,
        recorded_model,
        step(tool_use("toolu_1", "execute_sql", {"query": "cards"})),
        step(
            text(
                "You owe $1,500 on your cards.", cite(CARDS, "account_name: Credit card; balance: 1200", "Credit card")
            )
        ),
    )
    stored = check_events_equal_get(client, session_id, events)
    assert stored["inline_citations"][0]["target"] == {
        "kind": "accounts",
        "accounts": [
            {"accountId": "CARDaaaaaaaaaaaaaaaa1", "provider": "plaid"},
            {"accountId": "CARDbbbbbbbbbbbbbbbb2", "provider": "plaid"},
        ],
    }
    assert (stored["inline_citations"][0]["start"], stored["inline_citations"][0]["end"]) == (0, 29)


def test_disagreement_leaves_source_untyped(client, recorded_model):
    checking = "silvia://your-account/checking"
    session_id, events = run_turn(
        client,
        recorded_model,
        step(tool_use("toolu_1", "execute_sql", {"query": "checking"})),
        step(
            text("Checking holds $5,000.", cite(checking, "balance: 5000", "Checking")),
            tool_use("toolu_2", "execute_sql", {"query": "checking-unknown"}),
        ),
        step(text("Still $5,000.", cite(checking, "balance: 5000", "Checking"))),
    )
    stored = check_events_equal_get(client, session_id, events)
    first, second = stored["inline_citations"]
    assert first["target"] == {"kind": "account", "accountId": "CHKaaaaaaaaaaaaaaaaa1", "provider": "plaid"}
    assert "target" not in second  # the second write had no account: untyped from then on
    assert (second["start"], second["end"]) == (24, 37)


def test_emoji_before_a_citation(client, recorded_model):
    session_id, events = run_turn(
        client,
        recorded_model,
        step(tool_use("toolu_1", "execute_sql", {"query": "total"})),
        step(text("💰 Total: "), text("$6,500", cite("silvia://your-portfolio", "total: 6500", "Your portfolio"))),
    )
    stored = check_events_equal_get(client, session_id, events)
    # "💰" is two UTF-16 code units: "💰 Total: " is 10 units long.
    assert (stored["inline_citations"][0]["start"], stored["inline_citations"][0]["end"]) == (10, 16)
    assert stored["inline_citations"][0]["target"] == {"kind": "portfolio"}


def test_citation_with_no_text_around_it(client, recorded_model):
    session_id, events = run_turn(
        client,
        recorded_model,
        step(text("Checking first."), tool_use("toolu_1", "execute_sql", {"query": "total"})),
        step(text("", cite("silvia://your-portfolio", "total: 6500", "Your portfolio"), first=True)),
    )
    stored = check_events_equal_get(client, session_id, events)
    # A step without text adds nothing to the answer: the empty span sits at its end.
    assert stored["response"] == "Checking first."
    assert [(c["start"], c["end"]) for c in stored["inline_citations"]] == [(15, 15)]
    assert [name for _, name, _ in events].count("citation") == 1


def test_citation_of_a_source_the_turn_never_wrote(client, recorded_model):
    session_id, events = run_turn(
        client,
        recorded_model,
        step(text("Your portfolio is up.", cite("silvia://your-portfolio", "total: 1", "Your portfolio"))),
    )
    stored = check_events_equal_get(client, session_id, events)
    assert "target" not in stored["inline_citations"][0]


def test_other_citation_types_are_counted_not_stored(client, recorded_model):
    web = {
        "type": "web_search_result_location",
        "url": "https://www.irs.gov/publications/p590a",
        "title": "Publication 590-A",
        "cited_text": "You can contribute...",
        "encrypted_index": "abc",
    }
    page = {
        "type": "page_location",
        "cited_text": "x",
        "document_index": 0,
        "document_title": None,
        "start_page_number": 1,
        "end_page_number": 2,
    }
    search_block = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://www.irs.gov/publications/p590a",
                "title": "Publication 590-A",
                "encrypted_content": "e",
                "page_age": None,
            }
        ],
    }
    session_id, events = run_turn(
        client,
        recorded_model,
        step(search_block, text("IRA limits apply.", web, page)),
    )
    stored = check_events_equal_get(client, session_id, events)
    assert stored["inline_citations"] == [
        {
            "source": "https://www.irs.gov/publications/p590a",
            "title": "Publication 590-A",
            "cited_text": "You can contribute...",
            "start": 0,
            "end": 17,
            "target": {"kind": "web", "url": "https://www.irs.gov/publications/p590a"},
            # The page's text never reaches the service (docs/support.md).
            "support": {"status": "unchecked", "unmatched": [], "digest": None},
        }
    ]
    assert events[-1][2]["skipped_citations"] == {"page_location": 1}


def test_history_is_text_only(client, recorded_model):
    session_id, _ = run_turn(
        client,
        recorded_model,
        step(tool_use("toolu_1", "execute_sql", {"query": "total"})),
        step(text("Total $6,500.", cite("silvia://your-portfolio", "total: 6500"))),
    )
    wait_for_turns()
    again = step(text("Same as before.", cite("silvia://your-portfolio", "total: 6500")))
    recorded_model.load([script(again)])
    SCRIPTED[str(session_id)] = [again]
    _, response = post_turn(client, session_id=session_id, message="And now?")
    events = parse_sse(b"".join(response.streaming_content))
    assert recorded_model.requests[0]["messages"] == [
        {"role": "user", "content": "How much do I owe on my cards?"},
        {"role": "assistant", "content": "Total $6,500."},
        {"role": "user", "content": "And now?"},
    ]
    # The earlier turn's source is not this turn's: untyped.
    assert "target" not in check_events_equal_get(client, session_id, events)["inline_citations"][0]


def test_legacy_prompt_has_no_citation_table(client, recorded_model):
    run_turn(client, recorded_model, step(text("Hi.")), prompt_version="legacy")
    assert "source_account_id" not in recorded_model.requests[0]["system"]
    wait_for_turns()
    run_turn(client, recorded_model, step(text("Hi.")))
    assert "source_account_id" in recorded_model.requests[0]["system"]
