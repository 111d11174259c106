"""`citations.uuids.parse_uuid`: an id has one spelling (docs/decisions.md). Pure: no database."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from citations.uuids import parse_uuid

ID = "d93ada3e-af5f-4e4e-823c-781fec71f26d"


@pytest.mark.parametrize("text", [ID, ID.upper()])
def test_the_dashed_form_in_either_case_is_read(text):
    assert parse_uuid(text) == uuid.UUID(ID)


@pytest.mark.parametrize(
    "value",
    [
        "{" + ID + "}",
        "urn:uuid:" + ID,
        ID.replace("-", ""),
        " " + ID,
        ID + "\n",
        ID[:-1],
        ID[:-1] + "g",
        "",
        None,
        uuid.UUID(ID),
        12,
        [ID],
    ],
)
def test_every_other_spelling_or_value_is_none(value):
    assert parse_uuid(value) is None


@given(st.uuids())
def test_the_canonical_form_round_trips(value):
    assert parse_uuid(str(value)) == value


@given(st.text(max_size=40))
def test_never_raises_and_reads_only_the_canonical_form(text):
    parsed = parse_uuid(text)
    assert parsed is None or str(parsed) == text.lower()
