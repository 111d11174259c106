"""citations.summary: the counts and search keys the admin reads (hand-computed)."""
from __future__ import annotations

import pytest

from citations.summary import MALFORMED, UNTYPED, classify_citation, delimited_member, summarize_citations

ID_A = "FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U"
ID_B = "qozD68xagSpdzNis02f1g3FwR8N8ZJXFRzj2c"


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        ({"source": "s"}, UNTYPED),
        ({"source": "s", "target": None}, MALFORMED),
        ({"source": "s", "target": {"kind": "weather"}}, MALFORMED),
        ({"source": "s", "target": {"kind": "portfolio"}}, "portfolio"),
        ("not an object", MALFORMED),
        (None, MALFORMED),
    ],
)
def test_classify_citation(entry, kind):
    assert classify_citation(entry)[0] == kind


def test_summary_of_a_mixed_row():
    citations = [
        {"source": "silvia://your-account/credit-card", "target": {"kind": "accounts", "accounts": [{"accountId": ID_A, "provider": "plaid"}, {"accountId": ID_B, "provider": None}]}},
        {"source": "silvia://analysis"},
        {"source": "silvia://analysis", "target": {"kind": "account"}},
        7,
    ]
    inline = [{"source": "https://www.irs.gov/p590a", "target": {"kind": "web", "url": "https://www.irs.gov/p590a"}}]

    summary = summarize_citations(citations, inline)

    assert (summary.citation_count, summary.typed_count, summary.untyped_count, summary.malformed_count) == (4, 1, 1, 2)
    assert summary.target_kinds == "|accounts|malformed|untyped|web|"
    assert summary.account_ids == f"|{ID_A}|{ID_B}|"
    assert summary.sources == "silvia://your-account/credit-card\nsilvia://analysis\nhttps://www.irs.gov/p590a"
    assert delimited_member("account") not in summary.target_kinds  # "account" is not "accounts"


@pytest.mark.parametrize("column", [None, {"source": "s"}, '[{"source": "s"}]'])
def test_a_column_that_is_not_a_list_is_one_malformed_entry(column):
    summary = summarize_citations(column, [])
    assert (summary.citation_count, summary.malformed_count, summary.target_kinds) == (1, 1, "|malformed|")


def test_an_id_holding_the_delimiter_is_not_indexed():
    target = {"kind": "account", "accountId": "a|b", "provider": None}
    assert summarize_citations([{"source": "s", "target": target}], []).account_ids == ""
