"""Hostile code in the `execute_python` sandbox (docs/sandbox.md#how-it-is-tested): the way out is the egress
proxy's allowlist only. A host not on it is refused and never looked up nor connected to; Finnhub through
the allowlist reaches a stand-in on loopback; without a Finnhub key there is no proxy and no way out."""

from __future__ import annotations

import json
import socket

import pytest

from citations.citable import to_citable_content
from citations.targets import MarketDataTarget
from tests.sandbox_support import QUOTE, FinnhubStandIn, Trap, make_certificate, run
from tools.egress import EgressAllowlist
from tools.python import ExecutePythonTool

FINNHUB = ("finnhub.io", 443)


# Sends one raw request to the egress proxy through the relay; prints the proxy's status line.
ASK_PROXY = """\
import json, os, socket, urllib.parse
def ask(request):
    proxy = urllib.parse.urlsplit(os.environ["https_proxy"])
    with socket.create_connection((proxy.hostname, proxy.port), timeout=5) as s:
        s.sendall(request.encode())
        return s.recv(200).decode().split("\\r\\n")[0]
"""


@pytest.fixture
def trap():
    listener = Trap()
    yield listener
    listener.stop()


def test_the_proxy_refuses_a_host_not_on_the_allowlist_connecting_nowhere(sandbox, trap, monkeypatch):
    lookups: list[object] = []
    real_getaddrinfo = socket.getaddrinfo

    def recording_getaddrinfo(*args, **kwargs):
        lookups.append(args[0])
        return real_getaddrinfo(*args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", recording_getaddrinfo)
    # finnhub.io is allowed (and sent to the trap, to see any connection at all).
    allowlist = EgressAllowlist(hosts=frozenset({FINNHUB}), overrides={FINNHUB: ("127.0.0.1", trap.port)})
    tool = ExecutePythonTool(sandbox=sandbox, allowlist=allowlist, timeout_seconds=5.0)
    requests = {
        "other host": "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
        "loopback": f"CONNECT 127.0.0.1:{trap.port} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "database": "CONNECT localhost:5432 HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "allowed host, other port": "CONNECT finnhub.io:80 HTTP/1.1\r\nHost: finnhub.io\r\n\r\n",
        "look-alike": "CONNECT finnhub.io.evil.example:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "plain HTTP": "GET http://finnhub.io/api/v1/quote HTTP/1.1\r\nHost: finnhub.io\r\n\r\n",
        "Host header says finnhub": "CONNECT evil.example:443 HTTP/1.1\r\nHost: finnhub.io:443\r\n\r\n",
        "not HTTP": "\x16\x03\x01 hello\r\n\r\n",
    }
    code = ASK_PROXY + f"print(json.dumps({{name: ask(r) for name, r in {requests!r}.items()}}))"
    seen = run(tool, code)
    assert seen == {
        "other host": "HTTP/1.1 403 Forbidden",
        "loopback": "HTTP/1.1 403 Forbidden",
        "database": "HTTP/1.1 403 Forbidden",
        "allowed host, other port": "HTTP/1.1 403 Forbidden",
        "look-alike": "HTTP/1.1 403 Forbidden",
        "plain HTTP": "HTTP/1.1 405 Method Not Allowed",
        "Host header says finnhub": "HTTP/1.1 403 Forbidden",
        "not HTTP": "HTTP/1.1 400 Bad Request",
    }
    assert trap.accepted_before_now() == 0
    assert lookups == []


@pytest.fixture(scope="module")
def finnhub(tmp_path_factory):
    cert, key = make_certificate(tmp_path_factory.mktemp("finnhub"), "finnhub.io")
    stand_in = FinnhubStandIn(cert, key)
    yield stand_in, cert.read_text()
    stand_in.stop()


FETCH_QUOTE = """\
import json, os, ssl, urllib.request
context = ssl.create_default_context(cadata=CA)  # the stand-in's certificate, for the test only
url = "https://finnhub.io/api/v1/quote?symbol=AAPL&token=" + os.environ["FINNHUB_API_KEY"]
with urllib.request.urlopen(url, context=context, timeout=5) as response:
    print(json.dumps({"symbol": "AAPL", **json.load(response)}))
"""


def test_finnhub_through_the_allowlist_reaches_the_stand_in(sandbox, finnhub):
    stand_in, ca = finnhub
    allowlist = EgressAllowlist(hosts=frozenset({FINNHUB}), overrides={FINNHUB: ("127.0.0.1", stand_in.port)})
    tool = ExecutePythonTool(sandbox=sandbox, allowlist=allowlist, finnhub_api_key="fh-test", timeout_seconds=10)
    tool_input = {"code": f"CA = {ca!r}\n" + FETCH_QUOTE}
    output = tool.run(tool_input, user=None)
    assert json.loads(output["stdout"]) == {"symbol": "AAPL", **QUOTE}
    assert stand_in.requests[-1] == ("/api/v1/quote", "AAPL", "fh-test")
    blocks = to_citable_content("execute_python", tool_input, output)
    assert [(b.source, b.target) for b in blocks] == [("silvia://market-data/finnhub/AAPL", MarketDataTarget("AAPL"))]


def test_without_a_finnhub_key_there_is_no_proxy_and_no_way_out(tool):
    code = """\
        import json, os, urllib.request
        try:
            urllib.request.urlopen("https://finnhub.io/api/v1/quote?symbol=AAPL", timeout=3)
            result = "fetched"
        except Exception as error:
            result = type(error).__name__
        print(json.dumps({"proxy": os.environ.get("https_proxy"), "fetch": result,
                          "socket": os.path.exists("/run/egress.sock")}))
    """
    assert run(tool, code) == {"proxy": None, "fetch": "URLError", "socket": False}
