"""The admin's tables are safe for any stored value (hypothesis): every string escaped, only the builders'
own tags and http(s) links, no admin template or module marking data safe, and no value that makes a
builder raise."""

from __future__ import annotations

import ast
import re
from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from chat.admin import display as admin_display
from citations.support import SUPPORT_STATUSES
from citations.targets import TARGET_KINDS
from tests.chat.admin_support import REPO

# Escaping holds for any stored value: whatever the strings hold, the HTML
# has only the builders' own tags and attributes, and links only to http(s).
_TAGS = {"table", "thead", "tbody", "tr", "th", "td", "span", "code", "em", "strong", "div", "ol", "li", "a", "br"}
_TAGS |= {"details", "summary", "pre", "mark"}
_CLASSES = {"citation-table", "citation-note", "citation-unmatched"} | {
    f"citation-kind citation-kind-{kind}" for kind in (*TARGET_KINDS, "untyped", "malformed")
}
_CLASSES |= {f"citation-support citation-support-{status}" for status in SUPPORT_STATUSES}


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.link_texts: list[str] = []
        self.in_link = False

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag == "a":
            self.link_texts.append("")
            self.in_link = True

    def handle_endtag(self, tag):
        if tag == "a":
            self.in_link = False

    def handle_data(self, data):
        if self.in_link:
            self.link_texts[-1] += data


_hostile = st.one_of(
    st.text(alphabet="<>&\"'=/ abcsript:", max_size=24),
    st.sampled_from(
        ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "javascript:alert(1)", 'https://x.org/"><b>']
    ),
)
_hostile_target = st.fixed_dictionaries(
    {"kind": st.sampled_from(TARGET_KINDS)},
    optional={
        "url": _hostile,
        "ticker": _hostile,
        "accountId": _hostile,
        "provider": _hostile,
        "accounts": st.lists(st.fixed_dictionaries({"accountId": _hostile, "provider": _hostile}), max_size=2),
    },
)
_hostile_entry = st.fixed_dictionaries(
    {},
    optional={
        "source": _hostile,
        "title": _hostile,
        "cited_text": _hostile,
        "start": st.integers(0, 6),
        "end": st.integers(0, 12),
        # Odd keys too: an unreadable target is shown as its JSON.
        "target": st.tuples(_hostile_target, st.dictionaries(_hostile, _hostile, max_size=1)).map(
            lambda parts: {**parts[1], **parts[0]}
        ),
        # Support (docs/support.md): its figures' texts are marked in the span and listed.
        "support": st.fixed_dictionaries(
            {
                "status": st.sampled_from(SUPPORT_STATUSES) | _hostile,
                "unmatched": st.lists(
                    st.fixed_dictionaries({"text": _hostile, "start": st.integers(0, 12), "end": st.integers(0, 12)}),
                    max_size=3,
                ),
                "digest": st.none() | _hostile | st.just("sha256:" + "0" * 64),
            }
        ),
    },
)


@settings(max_examples=200, deadline=None)
@given(column=st.lists(st.one_of(_hostile_entry, _hostile), max_size=4), answer=_hostile)
def test_any_stored_string_is_escaped_in_the_tables(column, answer):
    for html_text in (admin_display.citations_table(column), admin_display.inline_citations_table(column, answer)):
        parser = _Elements()
        parser.feed(html_text)
        for tag, attrs in parser.elements:
            assert tag in _TAGS, (tag, html_text)
            assert set(attrs) <= {"class", "style", "href", "rel", "target"}, (tag, attrs)
            assert attrs.get("class", "citation-table") in _CLASSES, attrs
            if tag == "a":
                assert re.fullmatch(r"https?://\S+", attrs["href"], re.IGNORECASE), attrs
        hrefs = [attrs["href"] for tag, attrs in parser.elements if tag == "a"]
        assert parser.link_texts == hrefs  # a link shows the URL it goes to


def test_the_admin_never_marks_data_safe():
    # Autoescape does all the escaping: no template of the admin turns it
    # off or marks a value safe, and no admin module marks a string safe
    # (format_html escapes its arguments; render_to_string returns safe output).
    for template in (REPO / "templates" / "admin").rglob("*.html"):
        text = template.read_text(encoding="utf-8")
        assert not re.search(r"\|\s*safe(seq)?\b|{%\s*autoescape\s+off", text), template
    for module in sorted((REPO / "chat" / "admin").glob("*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        used |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        used |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
        called = {
            getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
        }
        assert "mark_safe" not in used, module
        assert not called & {"SafeString", "SafeData"}, module  # SafeString as a return type is fine


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
_entry = st.fixed_dictionaries(
    {},
    optional={
        "source": st.one_of(st.text(), _json),
        "title": st.one_of(st.none(), st.text(), _json),
        "cited_text": st.one_of(st.text(), _json),
        "start": st.one_of(st.integers(-3, 40), _json),
        "end": st.one_of(st.integers(-3, 40), _json),
        "target": st.one_of(
            _json,
            st.fixed_dictionaries(
                {"kind": st.sampled_from(TARGET_KINDS)},
                optional={"url": _json, "ticker": _json, "accountId": _json, "accounts": _json},
            ),
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(column=st.one_of(_json, st.lists(st.one_of(_entry, _json), max_size=5)), answer=st.one_of(st.text(), _json))
def test_tables_never_raise_on_any_stored_value(column, answer):
    assert admin_display.citations_table(column)
    assert admin_display.inline_citations_table(column, answer)
    assert admin_display.pretty_json(column)
