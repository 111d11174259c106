"""The admin's pure HTML builders (chat/admin/display.py), no database: span cells, safe links, target
details, folded text, and the exact HTML each builder gives."""

from __future__ import annotations

import re

import pytest

from chat.admin import display as admin_display
from tests.chat.admin_support import ACCOUNT_A, ACCOUNT_B, cite

# -- the pure HTML builders ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "end", "label"),
    [
        (True, 2, "offsets missing or not integers"),
        (1.0, 2, "offsets missing or not integers"),
        ("1", 2, "offsets missing or not integers"),
        (None, None, "offsets missing or not integers"),
        (0, 99, "out of range (answer is 4 UTF-16 units)"),
        (3, 1, "out of range"),
        (2, 2, "empty span"),
        (1, 3, "a bound splits a character"),
    ],
)
def test_span_cell_labels_bad_spans(start, end, label):
    assert label in admin_display.span_cell("💳ab", start, end)


@pytest.mark.parametrize(
    ("url", "linked"),
    [
        ("https://example.org/x", True),
        ("HTTP://example.org", True),
        ("javascript:alert(1)", False),
        ("JavaScript:alert(1)", False),
        (" javascript:alert(1)", False),
        ("data:text/html,<script>x</script>", False),
        ("//example.org/x", False),
        ("https://", False),
        ("https://exa mple.org", False),
    ],
)
def test_safe_link_links_only_http_urls(url, linked):
    rendered = admin_display.safe_link(url)
    assert ("<a href=" in rendered) is linked
    assert "<script>" not in rendered


def test_target_details_show_provider_to_staff_and_label_untyped_and_malformed():
    account = admin_display.target_details(cite("s", {"kind": "account", "accountId": ACCOUNT_A, "provider": "Plaid"}))
    assert ACCOUNT_A in account and "<em>unknown</em>" in account  # "Plaid" is not a provider
    assert "no target" in admin_display.target_details(cite("s"))
    # A null target is a target key the backfill never fills: malformed, not untyped.
    assert "target cannot be read" in admin_display.target_details({"source": "s", "target": None})
    assert "target cannot be read" in admin_display.target_details(cite("s", {"kind": "web", "url": ""}))
    assert "not a citation object" in admin_display.target_details([1])
    assert "none (corpus document)" in admin_display.target_details(cite("s", {"kind": "card_document", "url": None}))


def test_folded_text_folds_long_text_in_details():
    assert "<details>" not in admin_display.folded_text("short")
    folded = admin_display.folded_text("<b>" + "x" * 500)
    assert folded.startswith("<details><summary>&lt;b&gt;") and "503 characters" in folded


# The exact HTML of each builder, written by hand: what the templates under
# templates/admin/chat/chatlog/display/ must give, data escaped as format_html
# escapes it.
NOTE = '<span class="citation-note" style="color:#b91c1c;font-style:italic">{}</span>'
NONE = '<span style="color:#6b7280">—</span>'
SHORT = '<span style="white-space:pre-wrap">{}</span>'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a <b> & \"c\" 'd'", SHORT.format("a &lt;b&gt; &amp; &quot;c&quot; &#x27;d&#x27;")),
        ("  two\nlines ", SHORT.format("  two\nlines ")),
        ("é" * admin_display.FOLD_AT, SHORT.format("é" * admin_display.FOLD_AT)),
        (
            "é" * (admin_display.FOLD_AT + 1),
            f"<details><summary>{'é' * admin_display.FOLD_PREVIEW}… ({admin_display.FOLD_AT + 1} characters)"
            f'</summary><div style="white-space:pre-wrap">{"é" * (admin_display.FOLD_AT + 1)}</div></details>',
        ),
        (None, NONE),
        (5, NOTE.format("not a string:") + " <code>5</code>"),
        ({"a": "<x>"}, NOTE.format("not a string:") + " <code>{&quot;a&quot;: &quot;&lt;x&gt;&quot;}</code>"),
    ],
    ids=["escaped", "whitespace kept", "at the fold", "folded", "null", "a number", "an object"],
)
def test_folded_text_html(text, expected):
    assert admin_display.folded_text(text) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "https://example.org/a?b=1&c=2",
            '<a href="https://example.org/a?b=1&amp;c=2" rel="noopener noreferrer" target="_blank">'
            "https://example.org/a?b=1&amp;c=2</a>",
        ),
        (
            'https://x.org/"><b>',
            '<a href="https://x.org/&quot;&gt;&lt;b&gt;" rel="noopener noreferrer" target="_blank">'
            "https://x.org/&quot;&gt;&lt;b&gt;</a>",
        ),
        ("javascript:alert(1)", "<code>javascript:alert(1)</code>"),
        (None, NONE),
        (["u"], "[&quot;u&quot;]"),
    ],
    ids=["http link", "quote in a link", "javascript", "null", "a list"],
)
def test_safe_link_html(url, expected):
    assert admin_display.safe_link(url) == expected


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (0, 2, '<code>0–2</code><br>“<span style="white-space:pre-wrap">💳</span>”'),
        (2, 4, '<code>2–4</code><br>“<span style="white-space:pre-wrap">a&lt;</span>”'),
        (
            1,
            3,
            '<code>1–3</code><br>“<span style="white-space:pre-wrap">\ufffda</span>” '
            + NOTE.format("a bound splits a character"),
        ),
        ("1", 2, "<code>&quot;1&quot;–2</code> " + NOTE.format("offsets missing or not integers")),
        (0, 99, "<code>0–99</code> " + NOTE.format("out of range (answer is 4 UTF-16 units)")),
        (4, 4, "<code>4–4</code> " + NOTE.format("empty span")),
    ],
    ids=["emoji", "escaped", "splits a pair", "not integers", "out of range", "empty"],
)
def test_span_cell_html(start, end, expected):
    assert admin_display.span_cell("💳a<", start, end) == expected


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            cite("s", {"kind": "account", "accountId": ACCOUNT_A, "provider": "plaid"}),
            f"<div><strong>account id</strong>: <code>{ACCOUNT_A}</code></div>"
            "<div><strong>provider</strong>: plaid</div>",
        ),
        (
            cite(
                "s",
                {
                    "kind": "accounts",
                    "accounts": [
                        {"accountId": ACCOUNT_A, "provider": None},
                        {"accountId": ACCOUNT_B, "provider": "manual"},
                    ],
                },
            ),
            '<strong>2 accounts</strong><ol style="margin:0;padding-left:1.5em">'
            f"<li><code>{ACCOUNT_A}</code> (<em>unknown</em>)</li><li><code>{ACCOUNT_B}</code> (manual)</li></ol>",
        ),
        (cite("s", {"kind": "market_data", "ticker": "AAPL"}), "<div><strong>ticker</strong>: <code>AAPL</code></div>"),
        (
            cite("s", {"kind": "tax_reference", "url": None}),
            "<div><strong>url</strong>: <em>none (corpus document)</em></div>",
        ),
        (cite("s", {"kind": "analysis"}), NONE),
        (cite("s"), "<em>no target: clients resolve it by source/title</em>"),
        (
            cite("s", {"kind": "weather", "x": "<i>"}),
            NOTE.format("target cannot be read") + "<br><code>{&quot;kind&quot;: &quot;weather&quot;, "
            "&quot;x&quot;: &quot;&lt;i&gt;&quot;}</code>",
        ),
    ],
    ids=["account", "accounts", "market data", "corpus document", "analysis", "untyped", "unreadable"],
)
def test_target_details_html(entry, expected):
    # A trailing newline is the template's line end, inside the table cell.
    assert admin_display.target_details(entry).strip() == expected


def test_kind_badge_and_pretty_json_html():
    assert admin_display.kind_badge("account") == (
        '<span class="citation-kind citation-kind-account" style="display:inline-block;padding:1px 6px;'
        'border-radius:8px;color:#fff;background:#b45309;font-size:11px;white-space:nowrap">account</span>'
    )
    assert 'background:#b91c1c;font-size:11px;white-space:nowrap">x</span>' in admin_display.kind_badge(
        "x"
    )  # an unknown kind: malformed's colour
    assert admin_display.pretty_json([{"t": "<é>"}]) == (
        '<pre style="white-space:pre-wrap;max-height:40em;overflow:auto">'
        "[\n  {\n    &quot;t&quot;: &quot;&lt;é&gt;&quot;\n  }\n]</pre>"
    )


def test_tables_html():
    table = admin_display.inline_citations_table(
        [cite("silvia://analysis", {"kind": "analysis"}, title=None, cited_text="c", start=1, end=2), "x"], "ab"
    )
    cells = [
        re.sub(r"\s+", " ", cell).strip()
        for cell in re.findall(r'<td style="vertical-align:top">(.*?)</td>', table, re.S)
    ]
    assert re.findall(r"<th>(.*?)</th>", table) == [
        "#",
        "kind",
        "span of the answer",
        "support",
        "target",
        "source",
        "title",
        "cited text",
    ]
    assert cells == [
        "1",
        admin_display.kind_badge("analysis"),
        admin_display.span_cell("ab", 1, 2),
        admin_display.support_cell({}),  # no support key: unchecked, labelled (docs/support.md)
        NONE,
        "<code>silvia://analysis</code>",
        "<em>no title</em>",
        SHORT.format("c"),
        "2",
        admin_display.kind_badge("malformed"),
        NOTE.format("no span"),
        admin_display.support_cell("x"),
        NOTE.format("not a citation object") + "<br><code>&quot;x&quot;</code>",
        NOTE.format("no source"),
        "<em>no title</em>",
        NONE,
    ]
    assert table.count("<tr>") == 3 and table.startswith('<table class="citation-table" style="width:100%">')
    assert admin_display.citations_table([]) == "<em>no citations</em>\n"
    assert admin_display.inline_citations_table([], "") == "<em>no inline citations</em>\n"
    assert admin_display.citations_table({"a": 1}).strip() == (
        NOTE.format("stored value is an object, not a list:") + " <code>{&quot;a&quot;: 1}</code>"
    )
