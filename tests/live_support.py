"""Helpers for live-turn tests: recorded streams, a recorded SQL tool, SSE parsing, server processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from django.db import connection

from citations.tools import ToolError

ROOT = Path(__file__).resolve().parent.parent


def cite(source: str, cited_text: str, title: str | None = None, index: int = 0) -> dict[str, Any]:
    return {
        "type": "search_result_location",
        "source": source,
        "title": title,
        "cited_text": cited_text,
        "search_result_index": index,
        "start_block_index": 0,
        "end_block_index": 1,
    }


def text(value: str, *citations: dict[str, Any], first: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": value}
    if citations:
        block["citations"] = list(citations)
    if first:
        block["citations_first"] = True
    return block


def tool_use(tool_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def step(*blocks: dict[str, Any], stop: str | None = None, **extra: Any) -> dict[str, Any]:
    stop = stop or ("tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn")
    return {"message": {"content": list(blocks), "stop_reason": stop}, **extra}


def script(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "test", "steps": list(steps), **extra}


#: execute_sql outputs by query, for the recorded SQL tool (docs/citable.md shapes).
SQL_OUTPUTS: dict[str, dict[str, Any]] = {
    "cards": {
        "rows": [
            {
                "account_name": "Credit card",
                "balance": 1200,
                "source": "plaid",
                "source_account_id": "CARDaaaaaaaaaaaaaaaa1",
            },
            {
                "account_name": "Credit card",
                "balance": 300,
                "source": "plaid",
                "source_account_id": "CARDbbbbbbbbbbbbbbbb2",
            },
        ]
    },
    "checking": {
        "rows": [
            {
                "account_name": "Checking",
                "balance": 5000,
                "source": "plaid",
                "source_account_id": "CHKaaaaaaaaaaaaaaaaa1",
            },
        ]
    },
    "checking-unknown": {"rows": [{"account_name": "Checking", "balance": 5000}]},
    "total": {"rows": [{"total": 6500}]},
}


class RecordedSqlTool:
    """An `execute_sql` executor answering from `SQL_OUTPUTS` (the finance branch brings the real one)."""

    name = "execute_sql"

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": "Read the user's accounts with SQL.",
            "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        }

    def run(self, tool_input: dict[str, Any], *, user: Any) -> dict[str, Any]:
        query = tool_input.get("query")
        if query == "slow":
            time.sleep(5)
        if query not in SQL_OUTPUTS:
            raise ToolError(f"unknown recorded query {query!r}")
        return SQL_OUTPUTS[query]


def recorded_sql_tool() -> RecordedSqlTool:
    return RecordedSqlTool()


def parse_frames(data: bytes) -> list[tuple[int, str, Any]]:
    """`(id, event, decoded data)` for each SSE frame as sent (comments and `retry:` skipped)."""
    events = []
    for frame in data.decode().split("\n\n"):
        fields: dict[str, str] = {}
        for line in frame.split("\n"):
            if line and not line.startswith(":") and ": " in line:
                key, value = line.split(": ", 1)
                fields[key] = value
        if "event" in fields:
            events.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
    return events


def wait_for_turns(timeout: float = 60.0) -> bool:
    """Wait until no live turn is queued or running (the workers finished them). True when none is left."""
    from live.models import LiveTurn

    deadline = time.monotonic() + timeout
    while LiveTurn.objects.active().exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def apply_rewind(events: list[tuple[int, str, Any]]) -> list[tuple[int, str, Any]]:
    """What a client holds once it applies each `rewind` (docs/live.md#rewind): the events after its `to` dropped.

    For a client that read from the first event, checks the rewind's
    `answer`: it is the text of the events kept.
    """
    held: list[tuple[int, str, Any]] = []
    for seq, name, data in events:
        if name == "rewind":
            held = [event for event in held if event[0] <= data["to"]]
            if held and held[0][0] == 1:
                assert data["answer"] == "".join(d["text"] for _, n, d in held if n == "text"), "rewind's answer"
        else:
            held.append((seq, name, data))
    return held


def parse_sse(data: bytes) -> list[tuple[int, str, Any]]:
    """The events a client holds after reading `data`: `parse_frames`, each `rewind` applied."""
    return apply_rewind(parse_frames(data))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url() -> str:
    """The URL of the test database this process uses, for server processes started by a test."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    host, port = settings.get("HOST") or "127.0.0.1", settings.get("PORT") or 5432
    return f"postgres://{settings.get('USER') or 'postgres'}@{host}:{port}/{settings['NAME']}"


class ServerProcess:
    """`uvicorn silvia.asgi:application` in its own process, on the test database, with a job-engine worker.

    The worker is the Procfile's `worker:` line on the embedded broker in a
    folder of this server's own (docs/job-engine.md), so turns posted to
    this server run. `kill()` SIGKILLs the web process only.
    """

    def __init__(self, env: dict[str, str]) -> None:
        import tempfile

        from tests.procfile import ProcfileProcess

        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.folder = Path(tempfile.mkdtemp(prefix="silvia-test-server-"))
        broker = {"CELERY_BROKER_URL": "", "CELERY_BROKER_DIR": str(self.folder / "broker")}
        full_env = {**os.environ, "DATABASE_URL": database_url(), "DJANGO_DEBUG": "false", **broker, **env}
        self.worker = ProcfileProcess("worker", full_env, self.folder / "worker.log")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "silvia.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=full_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            self.worker.wait_until(" ready.")
        except RuntimeError:
            self.stop()
            raise
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        self.process.stderr.read().decode() if self.process.stderr else "server died"
                    ) from None
                time.sleep(0.05)
        raise RuntimeError("server did not start")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        import shutil

        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.worker.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def record_of(steps: list[dict[str, Any]], *, user: Any, message: str) -> dict[str, Any]:
    """The turn record (docs/turns.md#the-record) of a scripted live turn, for an import of the same turn.

    Each step's message (the last of its `attempts`) becomes an assistant
    event; each `tool_use` of a `tool_use` step is run by the configured
    executor (as the live turn ran it), a failing one left out as the live
    turn leaves it out.
    """
    from devtools.recorded_model import RECORDED_MODEL
    from tools.registry import configured_tools

    tools = {tool.name: tool for tool in configured_tools()}
    events: list[dict[str, Any]] = []
    for scripted in steps:
        scripted = scripted["attempts"][-1] if "attempts" in scripted else scripted
        content = [{k: v for k, v in b.items() if k != "citations_first"} for b in scripted["message"]["content"]]
        stop = scripted["message"]["stop_reason"]
        model_message = {"type": "message", "role": "assistant", "model": RECORDED_MODEL, "content": content}
        events.append({"type": "assistant", "message": {**model_message, "stop_reason": stop}})
        for block in content if stop == "tool_use" else []:
            if block["type"] != "tool_use":
                continue
            try:
                output = tools[block["name"]].run(block["input"], user=user)
            except Exception:
                continue
            events.append(
                {
                    "type": "tool_call",
                    "id": block["id"],
                    "name": block["name"],
                    "input": block["input"],
                    "output": output,
                }
            )
    return {"session": {"id": str(uuid.uuid4())}, "prompt_version": "v5", "user_message": message, "events": events}


def tool_use_raw(tool_id: str, name: str, partial_json: str) -> dict[str, Any]:
    """A `tool_use` block the recorded model streams as `partial_json`, verbatim (cut off, invalid, ...)."""
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {}, "partial_json": partial_json}


class SSEClient:
    """A real HTTP client for one SSE response (stdlib `http.client`), read event by event."""

    def __init__(
        self, base_url: str, method: str, path: str, token: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> None:
        import http.client
        from urllib.parse import urlsplit

        url = urlsplit(base_url)
        self.conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
        payload = json.dumps(body).encode() if body is not None else None
        all_headers = {"Authorization": f"Token {token}", "Accept": "text/event-stream", **(headers or {})}
        if payload is not None:
            all_headers["Content-Type"] = "application/json"
        self.conn.request(method, path, body=payload, headers=all_headers)
        self.response = self.conn.getresponse()
        self.status = self.response.status

    def events(self, limit: int | None = None, timeout: float = 120.0) -> list[tuple[int, str, Any]]:
        """Read up to `limit` events as sent (all until the stream ends when None), for at most `timeout`
        seconds (keep-alives would keep a stuck stream open for ever); `apply_rewind` applies rewinds."""
        out: list[tuple[int, str, Any]] = []
        frame: list[bytes] = []
        deadline = time.monotonic() + timeout
        while limit is None or len(out) < limit:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no end of the stream in {timeout} s; read {out[-3:]}")
            line = self.response.readline()
            if not line:
                break
            if line in (b"\n", b"\r\n"):
                out.extend(parse_frames(b"".join(frame) + b"\n\n"))
                frame = []
            else:
                frame.append(line)
        return out

    def close(self) -> None:
        self.conn.close()


def running_turn(user: Any) -> Any:
    """A running turn with its `turn` event that no worker advances: its streams stay open (keep-alives)
    until closed."""
    from citations.live_events import turn_event
    from live.log import encode
    from live.models import LiveTurn, LiveTurnEvent, LiveTurnStatus

    session_id = uuid.uuid4()
    turn = LiveTurn.objects.create(
        session_id=session_id,
        user=user,
        user_message="hi",
        prompt_version="v5",
        status=LiveTurnStatus.RUNNING,
        last_seq=1,
        worker_token=uuid.uuid4(),
    )
    event = turn_event(turn_id=str(turn.id), session_id=str(session_id))
    LiveTurnEvent.objects.create(turn=turn, seq=1, event=event.name, data=encode(event))
    return turn
