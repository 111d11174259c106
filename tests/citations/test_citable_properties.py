"""Properties of `to_citable_content` (hypothesis, docs/citable.md): it never raises on any tool call and its
blocks are well formed; execute_sql's blocks match a naive reference of the rule, and a row's text leaves
out the vendor and id columns. Pure: no database."""

from __future__ import annotations

import json

from django.utils.text import slugify
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citations import citable
from citations.accounts import account_ref_from_row
from citations.citable import LABEL_COLUMNS, LIBRARY_TOOLS, render_sql_row, to_citable_content
from citations.pooling import accounts_target
from citations.targets import CitationTarget, PortfolioTarget, parse_citation_target
from tests.citations.citable_support import OTHER_ID, PLAID_ID, PORTFOLIO, SNAPTRADE_ID, _assert_well_formed

# --- properties ----------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=12,
)

ids = st.sampled_from([PLAID_ID, OTHER_ID, SNAPTRADE_ID, "short", "1234567890123456789", PLAID_ID + "\n"])
labels = (
    st.sampled_from(["Checking", "checking", "Credit card", "", " ", "!!!", "Roth IRA (Vanguard)", 1, 1.0, True])
    | json_scalars
)
sql_rows = st.fixed_dictionaries(
    {},
    optional={
        "account_name": labels,
        "account_display_name": labels,
        "source": st.sampled_from(["plaid", "manual", "snaptrade", "coinbase", None, "Plaid"]) | json_values,
        "source_account_id": ids | json_values,
        "snaptrade_account_id": ids,
        "account_uuid": ids,
        "account_id": ids | json_values,
        "current_balance": json_values,
    },
)
sql_outputs = st.fixed_dictionaries(
    {"rows": st.lists(sql_rows | json_values, max_size=8) | json_values},
    optional={
        "columns": st.lists(st.sampled_from(["current_balance", "account_name", "source"]) | json_values, max_size=4)
        | json_values
    },
)
# Rows that keep to the fast path most of the time: dicts, string labels,
# mostly valid ids.
fast_rows = st.lists(
    st.fixed_dictionaries(
        {"account_name": st.sampled_from(["Checking", "checking", "Credit card", " ", "Roth"]) | st.none()},
        optional={
            "source": st.sampled_from(["plaid", "manual", "snaptrade", "coinbase", None]),
            "source_account_id": st.sampled_from([PLAID_ID, OTHER_ID, SNAPTRADE_ID]),
            "account_id": st.sampled_from([PLAID_ID, OTHER_ID]),
            "v": st.integers(),
        },
    ),
    max_size=12,
)

python_stdout = st.lists(
    st.sampled_from(
        [
            '{"symbol": "AAPL", "c": 1}',
            '{"ticker": "vti"}',
            '[{"symbol": "BND"}, {"c": 2}, {}]',
            '{"results": [{"url": "https://a.example", "title": "A", "text": "t"}, {"x": 1}]}',
            '{"results": [{"url": "https://a.example"}]}',
            "{}",
            "[]",
            "NaN",
            '{"c": NaN}',
            "",
            "  ",
            "finnhub",
            "plain text",
        ]
    )
    | st.text(max_size=20)
    | json_values.map(json.dumps),
    max_size=6,
).map("\n".join)

tool_calls = st.one_of(
    st.tuples(st.just("execute_sql"), json_values, sql_outputs | json_values),
    st.tuples(
        st.just("execute_python"),
        st.fixed_dictionaries({}, optional={"code": st.sampled_from(["import finnhub", "x = 1"]) | json_values})
        | json_values,
        st.fixed_dictionaries({}, optional={"stdout": python_stdout | json_values, "stderr": json_values})
        | json_values,
    ),
    st.tuples(
        st.sampled_from(sorted(LIBRARY_TOOLS)),
        st.fixed_dictionaries({}, optional={"path": st.text(max_size=12) | json_values}) | json_values,
        st.fixed_dictionaries(
            {},
            optional={
                "path": st.text(max_size=12) | json_values,
                "content": st.text(max_size=12) | json_values,
                "meta": st.fixed_dictionaries(
                    {},
                    optional={
                        "source_url": st.sampled_from(
                            [
                                "https://www.ecfr.gov/api/versioner/v1/full/current/title-12.xml?part=1026",
                                "https://www.irs.gov/p17",
                                "http://x",
                                "ftp://x",
                            ]
                        )
                        | json_values,
                        "title": json_values,
                    },
                )
                | json_values,
            },
        )
        | json_values,
    ),
    st.tuples(
        st.just("search_web"),
        json_values,
        st.fixed_dictionaries(
            {},
            optional={
                "results": st.lists(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "url": st.sampled_from(["https://a.example", "https://b.example", "nope"]) | json_values,
                            "title": json_values,
                            "text": json_values,
                        },
                    )
                    | json_values,
                    max_size=5,
                )
                | json_values
            },
        )
        | json_values,
    ),
    st.tuples(json_values, json_values, json_values),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool_calls)
def test_to_citable_content_never_raises_and_blocks_are_well_formed(call):
    tool, tool_input, output = call
    results = to_citable_content(tool, tool_input, output)
    _assert_well_formed(results)
    for result in results:
        if result.target is not None:
            # Every target survives its own wire format.
            assert parse_citation_target(result.target.to_json()) == result.target


def _reference_sql(rows: list) -> list[tuple[str, str, CitationTarget | None]]:
    """docs/citable.md's execute_sql rule written naively, as an oracle."""
    if not rows:
        return [(PORTFOLIO, "Your portfolio", PortfolioTarget())]
    label_column = next((c for c in LABEL_COLUMNS if any(isinstance(r, dict) and c in r for r in rows)), None)
    if label_column is None:
        return [(PORTFOLIO, "Your portfolio", PortfolioTarget())]
    groups: dict[str, dict] = {}
    for row in rows:
        label = row.get(label_column) if isinstance(row, dict) else None
        text = None if label is None else label if isinstance(label, str) else str(label)
        if text is None or not text.strip():
            groups.setdefault(PORTFOLIO, {"title": "Your portfolio", "portfolio": True})
            continue
        group = groups.setdefault(
            "silvia://your-account/" + (slugify(text) or "account"),
            {"title": text, "portfolio": False, "refs": [], "untyped": False},
        )
        ref = account_ref_from_row(row)
        if ref is None:
            group["untyped"] = True
        else:
            group["refs"].append(ref)
    out: list[tuple[str, str, CitationTarget | None]] = []
    for source, group in groups.items():
        target: CitationTarget | None
        if group["portfolio"]:
            target = PortfolioTarget()
        elif group["untyped"] or not group["refs"]:
            target = None
        else:
            target = accounts_target(group["refs"])
        out.append((source, group["title"], target))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(sql_rows | json_values, max_size=10) | fast_rows)
def test_sql_matches_the_naive_rule(rows):
    expected = _reference_sql(rows)
    results = to_citable_content("execute_sql", {}, {"rows": rows})
    assert [(r.source, r.title, r.target) for r in results] == expected
    _assert_well_formed(results)
    # Every row is rendered into exactly one block: none lost, none repeated.
    rendered = [render_sql_row(row) for row in rows] if isinstance(rows, list) else []
    assert (
        sorted(t for r in results for t in r.texts if t != citable.EMPTY_ROWS_TEXT)
        == sorted(t for t in rendered if t.strip())
        or not rows
    )


def test_sql_row_text_leaves_out_the_vendor_and_id_columns():
    # docs/privacy.md: the provider never reaches text a user may see; the
    # golden turns cite exactly this text for these rows.
    rows = [
        {
            "source": "plaid",
            "source_account_id": "FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U",
            "account_name": "Credit card",
            "current_balance": 1250.33,
        },
        {
            "source": "plaid",
            "source_account_id": "qozD68xagSpdzNis02f1g3FwR8N8ZJXFRzj2c",
            "account_name": "Credit card",
            "current_balance": 310.0,
        },
    ]
    (block,) = to_citable_content("execute_sql", {"query": "q"}, {"rows": rows})
    assert list(block.texts) == [
        "account_name: Credit card; current_balance: 1250.33",
        "account_name: Credit card; current_balance: 310.0",
    ]
    assert (
        render_sql_row(
            {
                "account_id": "x" * 20,
                "snaptrade_account_id": "y",
                "manual_account_uuid": "z",
                "account_uuid": "w",
                "balance": 1,
            }
        )
        == "balance: 1"
    )
