"""Hostile `execute_python` code through a live turn (docs/sandbox.md#how-it-is-tested).

A real uvicorn server runs the turn; the recorded model asks for three
`execute_python` calls: one that tries to read the server's environment,
settings and database and to reach its port, PostgreSQL, Redis and a host
off the allowlist; a fork bomb; and a Finnhub quote through the allowlist
(a TLS stand-in on loopback). The turn goes on: the model gets the refusals
as output, the bomb as an `is_error` result, the quote as a cited
`market_data` source, and nothing of the server's secrets.
"""

from __future__ import annotations

import json
import uuid

import pytest
from django.conf import settings
from django.db import connection
from rest_framework.authtoken.models import Token

from chat.models import ChatLog
from tests.live_support import ServerProcess, SSEClient, cite, script, step, text, tool_use
from tests.sandbox_support import QUOTE, FinnhubStandIn, make_certificate, the_sandbox

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "live-sandbox-secret-" + uuid.uuid4().hex

HOSTILE = """\
import json, os, socket, urllib.parse
def attempt(action, *args):
    try:
        return "done: " + str(action(*args))[:100]
    except Exception as error:
        return type(error).__name__
def read(path):
    with open(path, "rb") as f:
        return f.read()
def connect(port):
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
def ask_proxy(target):
    proxy = urllib.parse.urlsplit(os.environ["https_proxy"])
    with socket.create_connection((proxy.hostname, proxy.port), timeout=5) as s:
        s.sendall(f"CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n".encode())
        return s.recv(100).decode().split("\\r\\n")[0]
print(json.dumps({
    "proc 1 environ": attempt(read, "/proc/1/environ"),
    "parent environ": attempt(read, f"/proc/{os.getppid()}/environ"),
    "settings": attempt(read, SETTINGS),
    "database": attempt(read, DATABASE),
    "service port": attempt(connect, PORT),
    "postgresql": attempt(connect, 5432),
    "redis": attempt(connect, 6379),
    "proxy, other host": ask_proxy("evil.example:443"),
    "proxy, the service": ask_proxy(f"127.0.0.1:{PORT}"),
}))
"""

FORK_BOMB = "import os\nwhile True:\n    os.fork()\n"

QUOTE_CODE = """\
import json, os, ssl, urllib.request
context = ssl.create_default_context(cadata=CA)  # the stand-in's certificate, for the test only
url = "https://finnhub.io/api/v1/quote?symbol=AAPL&token=" + os.environ["FINNHUB_API_KEY"]
with urllib.request.urlopen(url, context=context, timeout=5) as response:
    print(json.dumps({"symbol": "AAPL", **json.load(response)}))
"""


@pytest.fixture
def finnhub(tmp_path):
    cert, key = make_certificate(tmp_path, "finnhub.io")
    stand_in = FinnhubStandIn(cert, key)
    yield stand_in, cert.read_text()
    stand_in.stop()


def test_hostile_code_through_a_live_turn(maya, recorded_model, finnhub):
    the_sandbox()  # fails here, naming the reason, when bubblewrap cannot run
    stand_in, ca = finnhub
    server = ServerProcess(
        {
            "ANTHROPIC_BASE_URL": recorded_model.base_url,
            "ANTHROPIC_API_KEY": "test-key",
            "DJANGO_SECRET_KEY": SECRET,
            "LIVE_TOOL_FACTORIES": "",
            "LIVE_TURN_POLL_SECONDS": "0.05",
            "EXECUTE_PYTHON_ENABLED": "true",
            "EXECUTE_PYTHON_TIMEOUT_SECONDS": "10",
            "FINNHUB_API_KEY": "fh-live-key",
            "EGRESS_UPSTREAM_OVERRIDES": f"finnhub.io:443=127.0.0.1:{stand_in.port}",
        }
    )
    database = connection.settings_dict["NAME"] if connection.vendor == "sqlite" else "/var/lib/postgresql"
    hostile = (
        f"SETTINGS = {str(settings.BASE_DIR / 'silvia' / 'settings.py')!r}\n"
        f"DATABASE = {str(database)!r}\nPORT = {server.port}\n" + HOSTILE
    )
    quote = f'{{"symbol": "AAPL", {json.dumps(QUOTE)[1:]}'
    recorded_model.load(
        [
            script(
                step(
                    text("Let me look."),
                    tool_use("toolu_1", "execute_python", {"code": hostile}),
                    tool_use("toolu_2", "execute_python", {"code": FORK_BOMB}),
                    tool_use("toolu_3", "execute_python", {"code": f"CA = {ca!r}\n" + QUOTE_CODE}),
                ),
                step(text("AAPL is at $189.50.", cite("silvia://market-data/finnhub/AAPL", quote, "AAPL market data"))),
            )
        ]
    )
    try:
        token = Token.objects.create(user=maya).key
        client = SSEClient(
            server.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "AAPL?"}
        )
        events = client.events()
        client.close()
    finally:
        server.stop()
    assert events[-1][1] == "done", events[-1]

    results = {r["tool_use_id"]: r for r in recorded_model.requests[1]["messages"][-1]["content"]}
    # 1. Every attempt refused, reported as output the model reads.
    [block] = results["toolu_1"]["content"]
    # "finnhub" appears in the output (the key's name), so it is cited as Live data (docs/citable.md).
    assert block["source"] == "silvia://market-data/finnhub" and "is_error" not in results["toolu_1"]
    assert json.loads(block["content"][0]["text"]) == {
        "proc 1 environ": "done: " + str(b"FINNHUB_API_KEY=fh-live-key\x00"),  # what the tool passes, nothing else
        "parent environ": "done: " + str(b"FINNHUB_API_KEY=fh-live-key\x00"),
        "settings": "FileNotFoundError",
        "database": "FileNotFoundError",
        "service port": "ConnectionRefusedError",
        "postgresql": "ConnectionRefusedError",
        "redis": "ConnectionRefusedError",
        "proxy, other host": "HTTP/1.1 403 Forbidden",
        "proxy, the service": "HTTP/1.1 403 Forbidden",
    }
    # 2. The fork bomb: an is_error result, and the turn went on.
    assert results["toolu_2"]["is_error"] is True
    assert results["toolu_2"]["content"].startswith("execute_python exited with status 1: BlockingIOError")
    # 3. Finnhub through the allowlist: a cited market_data source.
    assert [b["source"] for b in results["toolu_3"]["content"]] == ["silvia://market-data/finnhub/AAPL"]
    assert stand_in.requests == [("/api/v1/quote", "AAPL", "fh-live-key")]
    stored = ChatLog.objects.get(pk=events[-1][2]["log_id"])
    assert stored.inline_citations[0]["target"] == {"kind": "market_data", "ticker": "AAPL"}
    assert SECRET not in json.dumps(recorded_model.requests)
