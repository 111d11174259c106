"""Helpers for the AI SDK stream tests: a turn record as the event log a live turn writes, a canned HTTP server,
and the real `ai` package's reader (tests/js/read_ui_stream.mjs)."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from citations.ai_sdk import HEADERS, Row
from citations.assembler import TurnAssembler
from citations.live_events import (
    StreamEvent,
    citations_summary_event,
    done_event,
    message_event,
    tool_call_event,
    tool_result_event,
    turn_event,
)
from citations.turn import AssistantEvent, ToolCallEvent, parse_turn_record

ROOT = Path(__file__).resolve().parent.parent
READER = ROOT / "tests" / "js" / "read_ui_stream.mjs"
AI_PACKAGE = ROOT / "node_modules" / "ai" / "package.json"


def turn_log(record: dict[str, Any]) -> list[Row]:
    """The event log a live turn of `record` writes (docs/live.md): `turn`, each step's `text` and `citation`
    events from the turn assembler, the log-only tool events, then `citations_summary`, `message`, `done`.

    Tool events as the runner appends them: a step's `tool_call`s first, then their `tool_result`s, each
    result's sources read from the registry right after its call was recorded.
    """
    parsed = parse_turn_record(record, user_given=True)
    turn_id, session_id = str(parsed.id), str(parsed.session_id)
    assembler = TurnAssembler()
    events: list[StreamEvent] = [turn_event(turn_id=turn_id, session_id=session_id)]
    results: list[StreamEvent] = []
    last: dict[str, Any] = {}
    for event in parsed.events:
        if isinstance(event, ToolCallEvent):
            events.append(tool_call_event(tool_call_id=event.id, name=event.name, tool_input=event.input))
            blocks = assembler.tool_call(event.name, event.input, event.output)
            sources = assembler.tool_sources(blocks)
            results.append(tool_result_event(tool_call_id=event.id, name=event.name, sources=sources))
        elif isinstance(event, AssistantEvent):
            events += results
            results = []
            events += assembler.assistant_message(event.message)
            last = dict(event.message)
    events += results
    result = assembler.result()
    summary: list[Mapping[str, Any]] = [*result.citations]
    events += [
        citations_summary_event(summary),
        message_event(last),
        done_event(
            log_id=turn_id,
            session_id=session_id,
            skipped_citations=result.skipped_citations,
            stop_reason=str(last.get("stop_reason")),
        ),
    ]
    # Through JSON, as the log stores them.
    return [(seq, event.name, json.loads(json.dumps(event.data))) for seq, event in enumerate(events, 1)]


class CannedServer:
    """A loopback HTTP server answering every request with one canned response; it records the requests."""

    def __init__(self, body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        canned = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                canned.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": json.loads(self.rfile.read(length)) if length else None,
                    }
                )
                self.send_response(status)
                for key, value in (dict(HEADERS) if headers is None else headers).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


@contextlib.contextmanager
def canned_server(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Iterator[CannedServer]:
    server = CannedServer(body, status, headers)
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


def need_node() -> str:
    """The `node` binary, with the `ai` package installed (`npm ci`); skip without them, fail under CI."""
    node = shutil.which("node")
    missing = "node is not installed" if node is None else None
    if missing is None and not AI_PACKAGE.exists():
        missing = f"the ai package is not installed: run `npm ci` in {ROOT}"
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    assert node is not None
    return node


def read_ui_message(request: dict[str, Any]) -> dict[str, Any]:
    """What tests/js/read_ui_stream.mjs prints for `request` (`{"url", "method"?, "headers"?, "body"?}`)."""
    done = subprocess.run(
        [need_node(), str(READER)],
        input=json.dumps(request).encode(),
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)
