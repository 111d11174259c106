"""`search_web` against a real HTTP server on 127.0.0.1 speaking Exa's `/search` JSON
(`../shared/reference/formats.md` section 3)."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from django.core.exceptions import ImproperlyConfigured

from citations.citable import to_citable_content
from citations.targets import WebTarget
from citations.tools import ToolError, ToolExecutor
from tools.egress import EgressAllowlist
from tools.search_web import SearchWebTool, results_from_answer, search_web_tool

KEY = "exa-secret-key-123"

# Shortened from Exa's documented answer (formats.md 3.1), plus the cases a
# real answer has: a result without text, one without a URL.
EXA_ANSWER = {
    "requestId": "b5947044c4b78efa9552a7c89b306d95",
    "results": [
        {
            "title": "IRA deduction limits",
            "url": "https://www.irs.gov/retirement-plans/ira-deduction-limits",
            "publishedDate": "2026-01-02T00:00:00.000Z",
            "author": None,
            "id": "https://www.irs.gov/retirement-plans/ira-deduction-limits",
            "text": "For 2026, the IRA contribution limit is $7,500.",
        },
        {
            "title": "Roth IRA basics",
            "url": "https://www.example.org/roth",
            "id": "x",
            "highlights": ["A Roth IRA is funded with after-tax money.", "Withdrawals can be tax-free."],
        },
        {"title": "No URL here", "url": None, "text": "An orphan passage."},
    ],
    "searchType": "auto",
    "costDollars": {"total": 0.007},
}


class _Exa(BaseHTTPRequestHandler):
    """Answers `POST /search` with the test's script: `status`, `body` (bytes), `delay` seconds
    before the answer, `drip` seconds between its bytes."""

    script: ClassVar[dict] = {}
    requests: ClassVar[list] = []

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        _Exa.requests.append(
            {"path": self.path, "headers": dict(self.headers), "body": json.loads(self.rfile.read(length))}
        )
        time.sleep(self.script.get("delay", 0))
        body = self.script.get("body", b"")
        try:
            self.send_response(self.script.get("status", 200))
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            if self.script.get("drip"):
                for i in range(len(body)):
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
                    time.sleep(self.script["drip"])
            else:
                self.wfile.write(body)
        except OSError:
            pass  # the client gave up (timeout test)

    def log_message(self, *args):
        pass


def exa_test_on_loopback(port: int) -> EgressAllowlist:
    """An allowlist holding `exa.test:<port>`, sent to 127.0.0.1 by an upstream override."""
    return EgressAllowlist(hosts=frozenset({("exa.test", port)}), overrides={("exa.test", port): ("127.0.0.1", port)})


class FakeExa:
    """The running server: `url` (a name the egress allowlist sends to it), the `requests` it got,
    and `__call__` to script its answer."""

    def __init__(self, port: int) -> None:
        self.url = f"http://exa.test:{port}"
        self.allowlist = exa_test_on_loopback(port)
        self.port = port
        self.requests: list = []
        _Exa.requests = self.requests

    def __call__(self, status=200, body=None, raw=None, delay=0.0, drip=0.0):
        raw = raw if raw is not None else json.dumps(body).encode()
        _Exa.script = {"status": status, "body": raw, "delay": delay, "drip": drip}


@pytest.fixture
def exa():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Exa)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield FakeExa(server.server_address[1])
    server.shutdown()
    server.server_close()


def _tool(exa, **kw):
    return SearchWebTool(api_key=KEY, base_url=exa.url + "/", allowlist=exa.allowlist, **{"timeout_seconds": 2.0, **kw})


def test_is_a_tool_executor():
    assert isinstance(SearchWebTool(api_key=KEY), ToolExecutor)
    assert SearchWebTool(api_key=KEY).definition()["name"] == "search_web"
    assert SearchWebTool(api_key=KEY).definition()["input_schema"]["required"] == ["query"]
    assert KEY not in repr(SearchWebTool(api_key=KEY))


def test_success_sends_exa_request_and_returns_spec_shape(exa):
    exa(body=EXA_ANSWER)
    output = _tool(exa, max_results=3).run({"query": "  IRA limit 2026 "}, user=None)
    assert output == {
        "results": [
            {
                "url": "https://www.irs.gov/retirement-plans/ira-deduction-limits",
                "title": "IRA deduction limits",
                "text": "For 2026, the IRA contribution limit is $7,500.",
            },
            {
                "url": "https://www.example.org/roth",
                "title": "Roth IRA basics",
                "text": "A Roth IRA is funded with after-tax money.\n\nWithdrawals can be tax-free.",
            },
            {"url": None, "title": "No URL here", "text": "An orphan passage."},
        ]
    }
    [request] = exa.requests
    assert request["path"] == "/search"  # the base URL's trailing slash is not doubled
    assert request["headers"]["x-api-key"] == KEY
    assert request["body"] == {
        "query": "IRA limit 2026",
        "numResults": 3,
        "contents": {"text": {"maxCharacters": 4000}},
    }


def test_output_gives_spec_4_blocks(exa):
    exa(body=EXA_ANSWER)
    tool_input = {"query": "IRA limit"}
    blocks = to_citable_content("search_web", tool_input, _tool(exa).run(tool_input, user=None))
    assert [(b.source, b.title, b.texts, b.target) for b in blocks] == [
        (
            "https://www.irs.gov/retirement-plans/ira-deduction-limits",
            "IRA deduction limits",
            ["For 2026, the IRA contribution limit is $7,500."],
            WebTarget("https://www.irs.gov/retirement-plans/ira-deduction-limits"),
        ),
        (
            "https://www.example.org/roth",
            "Roth IRA basics",
            ["A Roth IRA is funded with after-tax money.\n\nWithdrawals can be tax-free."],
            WebTarget("https://www.example.org/roth"),
        ),
        ("silvia://search/search_web", "Web search", ["An orphan passage."], None),
    ]


def test_result_cap(exa):
    many = {"results": [{"url": f"https://e.com/{i}", "title": f"t{i}", "text": f"x{i}"} for i in range(9)]}
    exa(body=many)
    output = _tool(exa, max_results=2).run({"query": "q"}, user=None)
    assert [r["url"] for r in output["results"]] == ["https://e.com/0", "https://e.com/1"]


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (401, "web search refused the API key (HTTP 401)"),
        (403, "web search refused the API key (HTTP 403)"),
        (429, "web search is rate limited (HTTP 429); try again later"),
        (500, "web search service error (HTTP 500)"),
        (503, "web search service error (HTTP 503)"),
        (400, "web search failed (HTTP 400)"),
        (302, "web search failed (HTTP 302)"),
    ],
)
def test_http_errors(exa, status, reason):
    # Exa's error bodies can echo what was sent; nothing of it reaches the reason.
    exa(status=status, body={"error": f"invalid key {KEY}"})
    with pytest.raises(ToolError) as info:
        _tool(exa).run({"query": "q"}, user=None)
    assert info.value.reason == reason


def test_timeout(exa):
    exa(body=EXA_ANSWER, delay=1.5)
    with pytest.raises(ToolError) as info:
        _tool(exa, timeout_seconds=0.3).run({"query": "q"}, user=None)
    assert info.value.reason == "web search timed out after 0.3 s"


def test_whole_call_deadline_against_a_slow_drip(exa):
    # Every byte comes within the per-read timeout; the whole answer does not.
    exa(body=EXA_ANSWER, drip=0.05)
    started = time.monotonic()
    with pytest.raises(ToolError) as info:
        _tool(exa, timeout_seconds=0.4).run({"query": "q"}, user=None)
    assert info.value.reason == "web search timed out after 0.4 s"
    assert time.monotonic() - started < 2


def test_answer_too_large(exa):
    exa(raw=b'{"results": [], "pad": "' + b"x" * 2_000_001 + b'"}')
    with pytest.raises(ToolError) as info:
        _tool(exa).run({"query": "q"}, user=None)
    assert info.value.reason == "web search failed: the answer was too large"


@pytest.mark.parametrize("status", [401, 500])
def test_failures_log_no_key_and_no_query(exa, caplog, status):
    exa(status=status, body={"error": "x"})
    with caplog.at_level(logging.DEBUG), pytest.raises(ToolError):
        _tool(exa).run({"query": "balance of account FN30U5"}, user=None)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"HTTP {status}" in logged
    assert KEY not in logged and "FN30U5" not in logged


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"results": [', "web search failed: the answer was not valid JSON"),
        (b"<html>Bad gateway</html>", "web search failed: the answer was not valid JSON"),
        (b'{"results": {"url": "https://e.com"}}', "web search failed: the answer had no list of results"),
        (b'{"requestId": "x"}', "web search failed: the answer had no list of results"),
        (b'[{"url": "https://e.com"}]', "web search failed: the answer had no list of results"),
        (b"null", "web search failed: the answer had no list of results"),
    ],
)
def test_malformed_answers(exa, raw, reason):
    exa(raw=raw)
    with pytest.raises(ToolError) as info:
        _tool(exa).run({"query": "q"}, user=None)
    assert info.value.reason == reason


def test_unreachable_host_names_no_url_or_key():
    # A port nothing listens on (bound then closed), with the key in the URL's userinfo.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    allowlist = EgressAllowlist(
        hosts=frozenset({("exa.test", port)}), overrides={("exa.test", port): ("127.0.0.1", port)}
    )
    tool = SearchWebTool(
        api_key=KEY, base_url=f"http://user:{KEY}@exa.test:{port}", timeout_seconds=2, allowlist=allowlist
    )
    with pytest.raises(ToolError) as info:
        tool.run({"query": "q"}, user=None)
    assert info.value.reason == "web search is unreachable"
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_the_egress_allowlist_refuses_a_private_address_and_other_hosts(exa):
    # The same allowlist as the sandbox's (docs/sandbox.md#network): the base URL's
    # host must be on it, and a name resolving to loopback reaches nothing.
    exa(body=EXA_ANSWER)
    direct = SearchWebTool(api_key=KEY, base_url=f"http://127.0.0.1:{exa.port}", timeout_seconds=2)
    with pytest.raises(ToolError) as info:
        direct.run({"query": "q"}, user=None)
    assert info.value.reason == "web search is unreachable (the host name resolved to a private or reserved address)"
    other = SearchWebTool(api_key=KEY, base_url="http://elsewhere.test", timeout_seconds=2, allowlist=exa.allowlist)
    with pytest.raises(ToolError) as info:
        other.run({"query": "q"}, user=None)
    assert info.value.reason == "web search is unreachable (the host is not on the egress allowlist)"
    assert exa.requests == []


@pytest.mark.parametrize(
    ("tool_input", "reason"),
    [
        ({}, "input.query must be a non-empty string"),
        ({"query": "   "}, "input.query must be a non-empty string"),
        ({"query": 3}, "input.query must be a non-empty string"),
        ({"query": "x" * 2001}, "input.query is longer than 2000 characters"),
    ],
)
def test_bad_input_sends_nothing(exa, tool_input, reason):
    exa(body=EXA_ANSWER)
    with pytest.raises(ToolError) as info:
        _tool(exa).run(tool_input, user=None)
    assert info.value.reason == reason
    assert exa.requests == []


def test_results_from_answer_reads_fields_tolerantly():
    answer = {
        "results": [
            "not an object",
            {"url": 3, "title": "  ", "text": "a\x00b", "summary": "ignored"},
            {"url": "https://e.com", "title": "T", "summary": "  the summary  "},
            {"url": "https://f.com", "text": "y" * 5000},
        ]
    }
    assert results_from_answer(answer, limit=10) == [
        {"url": None, "title": None, "text": "a\ufffdb"},
        {"url": "https://e.com", "title": "T", "text": "the summary"},
        {"url": "https://f.com", "title": None, "text": "y" * 4000},
    ]


def test_factory_reads_settings(settings):
    settings.EXA_API_KEY = ""
    assert search_web_tool() is None
    settings.EXA_API_KEY = "  "
    assert search_web_tool() is None
    settings.EXA_API_KEY = KEY
    settings.EXA_BASE_URL = "http://127.0.0.1:9"
    settings.SEARCH_WEB_TIMEOUT_SECONDS = 4.0
    settings.SEARCH_WEB_MAX_RESULTS = 7
    settings.FINNHUB_API_KEY = ""
    tool = search_web_tool()
    assert tool is not None
    assert (tool.api_key, tool.base_url, tool.timeout_seconds, tool.max_results) == (KEY, "http://127.0.0.1:9", 4.0, 7)
    assert tool.allowlist == EgressAllowlist(hosts=frozenset({("127.0.0.1", 9)}))
    settings.SEARCH_WEB_MAX_RESULTS = 26
    with pytest.raises(ImproperlyConfigured, match="SEARCH_WEB_MAX_RESULTS must be 1 to 25"):
        search_web_tool()
    settings.SEARCH_WEB_MAX_RESULTS = 5
    settings.EXA_BASE_URL = "ftp://x"
    with pytest.raises(ImproperlyConfigured, match="EXA_BASE_URL must start with http:// or https://"):
        search_web_tool()
