"""execute_sql's rows -> search_result blocks with targets (docs/citable.md#execute_sql): the row text, the
label column, account pooling, fallback id columns, odd rows and cells. Pure: no database."""

from __future__ import annotations

import json

import pytest

from citations.citable import LABEL_COLUMNS, RowTexts, render_sql_row, to_citable_content
from citations.targets import AccountRef, AccountsTarget, PortfolioTarget
from tests.citations.citable_support import OTHER_ID, PLAID_ID, PORTFOLIO, SNAPTRADE_ID, _summary, _texts

# --- execute_sql -----------------------------------------------------------


def _sql(rows, **extra):
    return to_citable_content("execute_sql", {"query": "SELECT ..."}, {"rows": rows, **extra})


def test_sql_row_text_format():
    rows = [
        {"account_name": "Credit card", "current_balance": 1250.33},
        {"account_name": "Credit card", "current_balance": 310.0, "mask": None, "closed": False, "open": True},
        {"account_name": "Credit card", "n": 3, "tags": ["a", "é"], "meta": {"k": 1}},
    ]
    assert _texts(_sql(rows)) == {
        "silvia://your-account/credit-card": [
            "account_name: Credit card; current_balance: 1250.33",
            "account_name: Credit card; current_balance: 310.0; mask: null; closed: false; open: true",
            'account_name: Credit card; n: 3; tags: ["a", "é"]; meta: {"k": 1}',
        ]
    }


def test_sql_columns_give_the_order():
    rows = [{"current_balance": 1.5, "extra": "x", "account_name": "Checking"}]
    results = _sql(rows, columns=["account_name", "current_balance", "missing", 7])
    assert list(results[0].texts) == ["account_name: Checking; current_balance: 1.5; extra: x"]
    # Without columns, the row's own order.
    assert list(_sql(rows)[0].texts) == ["current_balance: 1.5; extra: x; account_name: Checking"]
    # A malformed columns value is ignored.
    assert list(_sql(rows, columns="account_name")[0].texts) == [
        "current_balance: 1.5; extra: x; account_name: Checking"
    ]


def test_no_rows_is_the_portfolio_with_a_saying_text():
    [result] = _sql([])
    assert (result.source, result.title, result.target) == (PORTFOLIO, "Your portfolio", PortfolioTarget())
    assert list(result.texts) == ["The query returned no rows."]


@pytest.mark.parametrize(
    "output", [{}, {"rows": None}, {"rows": {"a": 1}}, {"rows": "x"}, {"error": "syntax error"}, None, [], "rows"]
)
def test_sql_without_a_rows_list_gives_no_blocks(output):
    assert to_citable_content("execute_sql", {"query": "q"}, output) == []


def test_rows_without_columns_still_have_a_text():
    [result] = _sql([{}, {}])
    assert result.target == PortfolioTarget()
    assert list(result.texts) == ["The query returned rows without columns."]


def test_label_column_is_the_first_candidate_present_in_any_row():
    rows = [
        {"account_official_name": "Official", "x": 1},
        {"account_display_name": "Display", "x": 2},
    ]
    # account_display_name beats account_official_name although it appears later.
    results = _sql(rows)
    assert _summary(results) == [
        {"source": PORTFOLIO, "title": "Your portfolio", "target": {"kind": "portfolio"}},
        {"source": "silvia://your-account/display", "title": "Display", "target": None},
    ]
    assert LABEL_COLUMNS == ("account_name", "account_display_name", "account_official_name")


@pytest.mark.parametrize(
    ("label", "source", "title"),
    [
        (5, "silvia://your-account/5", "5"),
        (2.5, "silvia://your-account/25", "2.5"),
        (True, "silvia://your-account/true", "True"),
        ("!!!", "silvia://your-account/account", "!!!"),
        ("Café Crème", "silvia://your-account/cafe-creme", "Café Crème"),
        ("  Checking  ", "silvia://your-account/checking", "  Checking  "),
    ],
)
def test_labels_that_are_not_plain_strings(label, source, title):
    [result] = _sql([{"account_name": label, "v": 1}])
    assert (result.source, result.title) == (source, title)


def test_int_and_float_labels_are_different_texts():
    results = _sql([{"account_name": 1, "v": 1}, {"account_name": 1.0, "v": 2}, {"account_name": True, "v": 3}])
    assert [r.source for r in results] == [
        "silvia://your-account/1",
        "silvia://your-account/10",
        "silvia://your-account/true",
    ]


@pytest.mark.parametrize("label", [None, "", "   ", "\t\n"])
def test_null_or_blank_labels_go_to_the_portfolio(label):
    rows = [{"account_name": label, "source": "plaid", "source_account_id": PLAID_ID, "v": 1}]
    [result] = _sql(rows)
    assert (result.source, result.target) == (PORTFOLIO, PortfolioTarget())


def test_a_row_missing_the_label_key_goes_to_the_portfolio():
    rows = [{"account_name": "Checking", "v": 1}, {"v": 2}]
    assert [r.source for r in _sql(rows)] == ["silvia://your-account/checking", PORTFOLIO]


def test_merged_labels_keep_the_first_title():
    rows = [{"account_name": "Roth IRA (Vanguard)"}, {"account_name": "roth ira vanguard"}]
    [result] = _sql(rows)
    assert result.title == "Roth IRA (Vanguard)"
    assert list(result.texts) == ["account_name: Roth IRA (Vanguard)", "account_name: roth ira vanguard"]


def test_group_providers_pool_like_the_registry():
    rows = [
        {"account_name": "Chase", "source_account_id": PLAID_ID},  # provider null
        {"account_name": "Chase", "source_account_id": OTHER_ID, "source": "plaid"},
        {"account_name": "Chase", "source_account_id": PLAID_ID, "source": "plaid"},  # null gives way
        {"account_name": "Chase", "source_account_id": PLAID_ID, "source": "manual"},  # first known stays
    ]
    [result] = _sql(rows)
    assert result.target == AccountsTarget((AccountRef(PLAID_ID, "plaid"), AccountRef(OTHER_ID, "plaid")))


def test_one_row_without_an_account_untypes_the_group_whatever_its_position():
    base = {"account_name": "Chase", "source": "plaid", "source_account_id": PLAID_ID}
    for position in range(3):
        rows = [dict(base) for _ in range(3)]
        rows[position] = {"account_name": "Chase", "source": "plaid"}
        [result] = _sql(rows)
        assert result.target is None


def test_fallback_id_columns_type_the_group():
    rows = [
        {"account_name": "Brokerage", "snaptrade_account_id": SNAPTRADE_ID},
        {"account_name": "Brokerage", "account_id": PLAID_ID},
        {"account_name": "House", "manual_account_uuid": "d1d67b0f-c0fa-4035-a249-067b20c72546"},
    ]
    assert _summary(_sql(rows)) == [
        {
            "source": "silvia://your-account/brokerage",
            "title": "Brokerage",
            "target": {
                "kind": "accounts",
                "accounts": [
                    {"accountId": SNAPTRADE_ID, "provider": "snaptrade"},
                    {"accountId": PLAID_ID, "provider": None},
                ],
            },
        },
        {
            "source": "silvia://your-account/house",
            "title": "House",
            "target": {"kind": "account", "accountId": "d1d67b0f-c0fa-4035-a249-067b20c72546", "provider": "manual"},
        },
    ]


def test_invalid_source_account_id_falls_back_per_row():
    # Same (label, source_account_id, source) but different fallback ids.
    rows = [
        {"account_name": "A", "source_account_id": "bad", "account_id": PLAID_ID},
        {"account_name": "A", "source_account_id": "bad", "account_id": OTHER_ID},
    ]
    [result] = _sql(rows)
    assert result.target == AccountsTarget((AccountRef(PLAID_ID, None), AccountRef(OTHER_ID, None)))


def test_rows_that_are_not_objects_go_to_the_portfolio_as_their_value():
    rows = [{"account_name": "Checking", "v": 1}, 7, "text", None, ["a"]]
    results = _sql(rows)
    assert [r.source for r in results] == ["silvia://your-account/checking", PORTFOLIO]
    assert list(results[1].texts) == ["7", "text", "null", '["a"]']


def test_unhashable_cells_are_fine():
    rows = [
        {"account_name": "A", "source": ["plaid"], "source_account_id": PLAID_ID},
        {"account_name": "B", "source": "plaid", "source_account_id": {"id": PLAID_ID}, "account_id": OTHER_ID},
        {"account_name": ["x"], "v": 1},
    ]
    assert _summary(_sql(rows)) == [
        {"source": "silvia://your-account/a", "title": "A", "target": None},
        {
            "source": "silvia://your-account/b",
            "title": "B",
            "target": {"kind": "account", "accountId": OTHER_ID, "provider": None},
        },
        {"source": "silvia://your-account/x", "title": "['x']", "target": None},
    ]


def test_texts_is_a_list_rendered_on_first_read():
    rows = [{"account_name": "A", "v": 1}, {"account_name": "A", "v": 2}]
    (block,) = _sql(rows)
    rows[1]["v"] = 3  # not rendered yet: the SearchResult docstring says not to do this
    texts = block.texts
    assert type(texts) is list
    assert texts == ["account_name: A; v: 1", "account_name: A; v: 3"]
    texts.append("mine")  # a copy: the block is unchanged
    assert block.texts == ["account_name: A; v: 1", "account_name: A; v: 3"]
    assert json.loads(json.dumps(block.to_block()))["content"][1] == {"type": "text", "text": "account_name: A; v: 3"}


def test_row_texts_behave_as_a_sequence():
    texts = RowTexts([{"v": 1}, {}, {"v": 2}], None, "fallback")
    assert texts == ["v: 1", "v: 2"] and texts == ("v: 1", "v: 2")
    assert texts[-1] == "v: 2" and len(texts) == 2
    assert texts != "v: 1"
    assert RowTexts([{}], None, "fallback") == ["fallback"]


def test_render_sql_row_edge_values():
    assert (
        render_sql_row({"a": float("nan"), "b": float("inf"), "c": 10**20, "d": -0.0})
        == "a: nan; b: inf; c: 100000000000000000000; d: -0.0"
    )
    assert render_sql_row({"big": 10**5000}).startswith("big: 0x")
    assert render_sql_row(None) == "null"
