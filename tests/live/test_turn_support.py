"""Support (SPEC 15, docs/support.md) in live turns: each support case run as a live turn (the real SDK reading the
recorded model over HTTP, a Celery worker, tools answering with the case's outputs) streams its hand-computed support
in the `citation` events, stores it, GET serves it, and an import of the same turn stores the same row."""

from __future__ import annotations

import pytest

from tests import live_turns_support
from tests.cases import golden_params
from tests.live_turns_support import check_events_equal_get, run_turn
from tests.support_turns import CASES, TOOL_FACTORIES, live_steps

#: maya's API client (tests/live_turns_support.py), bound here for this module.
client = live_turns_support.client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("case", golden_params(CASES))
def test_a_live_turn_streams_stores_and_serves_the_hand_computed_support(client, recorded_model, settings, case):
    settings.LIVE_TOOL_FACTORIES = TOOL_FACTORIES
    session_id, events = run_turn(client, recorded_model, *live_steps(case["record"]))
    stored = check_events_equal_get(client, session_id, events)
    assert [data["citation"] for _, name, data in events if name == "citation"] == case["expect"]["inline_citations"]
    assert (stored["response"], stored["citations"], stored["inline_citations"]) == (
        case["expect"]["response"],
        case["expect"]["citations"],
        case["expect"]["inline_citations"],
    )
