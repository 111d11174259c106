"""A recorded model: a local HTTP server speaking the Messages API streaming wire format.

It is NOT Claude. It replays *recorded streams* (JSON scripts, see
`examples/recorded/README.md`) over the real SSE framing (`event: <name>` /
`data: <json>`), so the official `anthropic` SDK pointed at it by base URL
(`ANTHROPIC_BASE_URL=http://127.0.0.1:<port>`) runs exactly as it does
against the API: `message_start`, `content_block_start`/`delta`/`stop`
(`text_delta`, `citations_delta`, `input_json_delta`), `ping`,
`message_delta`, `message_stop`, `error` events, and HTTP error statuses
(529, 429, 500, 401, ...) with the API's error body.

Which step of a script a request gets is read from the request itself (the
number of tool rounds and `pause_turn` continuations since the last plain
user message), so concurrent turns and resumed turns need no server state. A
step may list `attempts`: the n-th request for it gets the n-th attempt (the
last one repeats), which scripts "529, then success" for the SDK's retries
and "cut off at max_tokens, then whole" for a step asked again with more
tokens (requests that differ only in `max_tokens` count as the same).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from devtools.recorded_stream import RECORDED_MODEL, message_events, sse_frame

logger = logging.getLogger(__name__)

__all__ = ["RECORDED_MODEL", "RecordedModelServer", "ScriptError", "load_scripts", "message_events"]


class ScriptError(ValueError):
    """A recorded stream file that cannot be used; the message names the file and the problem."""


def load_scripts(path: Path) -> list[dict[str, Any]]:
    """Read the recorded streams in `path` (a `.json` file, or a folder of them in name order).

    Each is `{"name", "match"?: [str], "model"?, "delay_ms"?, "steps": [step, ...]}`.
    Raises `ScriptError` naming the file for unreadable JSON or a missing `steps` list.
    """
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    scripts = []
    for file in files:
        try:
            script = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ScriptError(f"{file}: cannot read a recorded stream: {error}") from None
        if not isinstance(script, dict) or not isinstance(script.get("steps"), list) or not script["steps"]:
            raise ScriptError(f"{file}: expected an object with a non-empty 'steps' list")
        script.setdefault("name", file.stem)
        scripts.append(script)
    return scripts


def _step_index(messages: Sequence[Any]) -> int:
    """Steps done since the last user message that is not only tool results.

    A tool round ends with a user message of tool results; a `pause_turn`
    continuation with an assistant message that no user message follows.
    """
    rounds = 0
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, dict) and message.get("role") == "assistant":
            following = messages[i + 1] if i + 1 < len(messages) else None
            if not isinstance(following, dict) or following.get("role") != "user":
                rounds += 1
            continue
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if (
            isinstance(content, list)
            and content
            and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        ):
            rounds += 1
            continue
        break
    return rounds


def _last_user_text(messages: Sequence[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
                if texts:
                    return " ".join(texts)
    return ""


class RecordedModelServer:
    """The recorded model on 127.0.0.1 (a thread). `base_url` is what the SDK's `base_url` takes.

    `load(scripts)` replaces the scripts; a request is answered by the first
    script whose `match` words all appear (any case) in the last user text,
    else the first script without `match` (the catch-all), else the first script. `write_times` maps a message id to the
    `time.perf_counter()` of each `text_delta` written (for the benchmark).
    """

    def __init__(self, scripts: Sequence[Mapping[str, Any]] = (), *, port: int = 0, host: str = "127.0.0.1") -> None:
        self.scripts: list[Mapping[str, Any]] = list(scripts)
        self.requests: list[dict[str, Any]] = []
        self.write_times: dict[str, list[float]] = {}
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        self.httpd = _Server((host, port), _handler_for(self))
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def load(self, scripts: Sequence[Mapping[str, Any]]) -> None:
        """Serve `scripts` from now on and forget past attempts and requests."""
        with self._lock:
            self.scripts = list(scripts)
            self._attempts.clear()
            self.requests.clear()

    def start(self) -> RecordedModelServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="recorded-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def pick(self, body: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        """The script and the response (one attempt of one step) for a request body."""
        messages = body.get("messages") or []
        text = _last_user_text(messages).lower()
        with self._lock:
            self.requests.append(dict(body))
            matched = (s for s in self.scripts if s.get("match") and all(w.lower() in text for w in s["match"]))
            # No match: the first script without `match` words (the catch-all), else the first.
            fallback = next((s for s in self.scripts if not s.get("match")), self.scripts[0] if self.scripts else None)
            script = next(matched, fallback) or {"steps": [{"status": 500, "body": _error("api_error", "no script")}]}
            steps = script["steps"]
            step = steps[min(_step_index(messages), len(steps) - 1)]
            attempts: Any = step.get("attempts")
            if attempts:
                same = {key: value for key, value in body.items() if key != "max_tokens"}
                key = hashlib.sha256(json.dumps(same, sort_keys=True).encode()).hexdigest()
                n = self._attempts.get(key, 0)
                self._attempts[key] = n + 1
                step = attempts[min(n, len(attempts) - 1)]
        return script, step


class _Server(ThreadingHTTPServer):
    request_queue_size = 512  # a benchmark opens hundreds of streams at once
    daemon_threads = True


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _handler_for(server: RecordedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("recorded model: " + format, *args)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.path.split("?")[0].rstrip("/") != "/v1/messages":
                return self._json(404, _error("not_found_error", f"no route {self.path}"))
            try:
                body = json.loads(raw)
            except ValueError:
                return self._json(400, _error("invalid_request_error", "body is not JSON"))
            script, step = server.pick(body)
            if "raw" in step:
                return self._raw(int(step.get("status", 200)), str(step["raw"]), str(step.get("content_type", "")))
            if "status" in step:
                return self._json(step["status"], step.get("body") or _error("api_error", "recorded failure"))
            events = (
                [(e["event"], e["data"]) for e in step["events"]]
                if "events" in step
                else message_events(step["message"], model=script.get("model", RECORDED_MODEL))
            )
            self._stream(events, step, float(step.get("delay_ms", script.get("delay_ms", 0))) / 1000)

        def _json(self, status: int, payload: Mapping[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("retry-after-ms", "0")  # retries in tests cost no time
            self.send_header("request-id", "req_recorded")
            self.end_headers()
            self.wfile.write(data)

        def _raw(self, status: int, body: str, content_type: str) -> None:
            data = body.encode()
            self.send_response(status)
            if content_type:
                self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", "req_recorded")
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, events: list[tuple[str, dict[str, Any]]], step: Mapping[str, Any], delay: float) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("request-id", "req_recorded")
            self.end_headers()
            error_after, break_after, end_after = (
                step.get("error_after"),
                step.get("break_after"),
                step.get("end_after"),
            )
            msg_id = events[0][1].get("message", {}).get("id", "") if events else ""
            times = server.write_times.setdefault(msg_id, [])
            try:
                for n, (name, data) in enumerate(events):
                    if n == error_after:
                        self._chunk(sse_frame("error", step.get("error") or _error("overloaded_error", "Overloaded")))
                        break
                    if n == end_after:
                        break  # the body ends cleanly here, as a proxy that gave up would end it
                    if n == break_after:
                        self.wfile.flush()
                        self.close_connection = True
                        return  # no final chunk: the client sees a broken stream
                    if delay:
                        time.sleep(delay)
                    self._chunk(sse_frame(name, data))
                    if data.get("delta", {}).get("type") == "text_delta":
                        times.append(time.perf_counter())
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler
