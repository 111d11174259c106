"""Benchmark: live turns over SSE against one uvicorn process (issues 8 and 10).

    .venv/bin/python bench/live_turns.py                         # SQLite, 100 concurrent turns, 20 ms pacing
    .venv/bin/python bench/live_turns.py --turns 20              # what `make bench` runs
    .venv/bin/python bench/live_turns.py --database-url postgres://postgres@127.0.0.1:5432/postgres

Setup: a scratch database (a SQLite file in a temporary folder, or
`silvia_bench_live_<pid>` on the PostgreSQL server of `--database-url`,
dropped at the end), migrated; the recorded model in this process with
realistic pacing (`--delay-ms` between stream events, 12 characters a text
delta); one `uvicorn silvia.asgi:application` process.

Figures, each beside the baseline it is measured against in the same run:

- **time to first event**: POST -> the `turn` event, and -> the first `text`;
- **added latency per event**: the recorded model writing a `text_delta` ->
  our client reading the matching `text` event, median and p99, over
  `--turns` concurrent turns (one tool round each, so checkpoints are
  written). Baseline: the same streams read straight from the recorded model
  by the SDK, at the same concurrency. Stalls: gaps > 1 s inside a stream;
- **GET p99 under load**: `GET /api/chat/sessions/<id>` of another session
  while the turns stream, against the same GET with the server idle (goal <= 2x);
- **replay of a 5,000-event turn**: `GET /api/chat/turns/<id>/events?after=0`
  to the first event's bytes (goal <= 50 ms);
- **event log cost per event**: `append_event` (ownership check, insert,
  notify) against a bare INSERT of the same row, median (goal: <= 2 ms more).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._timing import postgres_server_url  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * len(ordered)) - 1))] if ordered else float("nan")


def ms(value: float) -> str:
    return f"{value * 1000:8.2f} ms"


def answer_script(delay_ms: float) -> dict[str, Any]:
    cite = {
        "type": "search_result_location",
        "source": "silvia://credit-card-corpus/chase/sapphire-preferred/pricing.md",
        "title": "Sapphire Preferred pricing and terms",
        "cited_text": "fee",
        "search_result_index": 0,
        "start_block_index": 0,
        "end_block_index": 1,
    }
    sentence = "Your card's annual fee is $95, and purchases cost 20.24% to 27.24% a year. "
    return {
        "name": "bench",
        "delay_ms": delay_ms,
        "steps": [
            {
                "message": {
                    "stop_reason": "tool_use",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "toolu_b1",
                            "name": "read_credit_card_document",
                            "input": {"path": "chase/sapphire-preferred/pricing.md"},
                        }
                    ],
                }
            },
            {
                "message": {
                    "stop_reason": "end_turn",
                    "content": [
                        {"type": "text", "text": sentence * 4, "citations": [cite]},
                        {"type": "text", "text": sentence * 4},
                    ],
                }
            },
        ],
    }


class Stream:
    """One SSE response read on a thread: receipt time of each event."""

    def __init__(self, port: int, method: str, path: str, token: str, body: Any = None) -> None:
        self.port, self.method, self.path, self.token, self.body = port, method, path, token, body
        self.events: list[tuple[float, str, Any]] = []
        self.started = 0.0

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        headers = {"Authorization": f"Token {self.token}", "Content-Type": "application/json"}
        self.started = time.perf_counter()
        conn.request(self.method, self.path, body=json.dumps(self.body) if self.body else None, headers=headers)
        response = conn.getresponse()
        name = None
        while True:
            line = response.readline()
            if not line:
                break
            if line.startswith(b"event: "):
                name = line[7:].strip().decode()
            elif line.startswith(b"data: ") and name:
                self.events.append((time.perf_counter(), name, json.loads(line[6:])))
                if name in ("done", "error"):
                    break
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--delay-ms", type=float, default=20.0, help="recorded model pacing between events")
    parser.add_argument("--replay-events", type=int, default=5000)
    parser.add_argument("--database-url", help="a postgres:// server URL (default: SQLite in a temporary folder)")
    args = parser.parse_args(argv)

    scratch = tempfile.mkdtemp(prefix="silvia-bench-live-")
    pg_admin = None
    if args.database_url:
        import psycopg

        server = postgres_server_url(args.database_url)
        name = f"silvia_bench_live_{os.getpid()}"
        pg_admin = (server, name)
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        database_url = server.rsplit("/", 1)[0] + "/" + name
    else:
        database_url = f"sqlite:///{scratch}/bench.sqlite3"
    os.environ.update({"DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "silvia.settings"})
    server_process = None
    try:
        subprocess.check_call([sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=ROOT)
        import django

        django.setup()
        return run(args, database_url, scratch)
    finally:
        if server_process is not None:
            server_process.terminate()
        if pg_admin is not None:
            from django.db import connections

            connections.close_all()
            import psycopg

            with psycopg.connect(pg_admin[0], autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {pg_admin[1]} WITH (FORCE)")
        shutil.rmtree(scratch, ignore_errors=True)


def run(args: argparse.Namespace, database_url: str, scratch: str) -> int:
    import anthropic
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from chat.models import ChatLog, ChatSession, LiveTurn, LiveTurnEvent
    from devtools.recorded_model import RecordedModelServer

    user = get_user_model().objects.create_user("bench")
    token = Token.objects.create(user=user).key
    other = ChatSession.objects.create(user=user, title="other")
    ChatLog.objects.bulk_create(
        ChatLog(session=other, user=user, user_message=f"q{i}", response="a" * 400, prompt_version="v5")
        for i in range(20)
    )
    model = RecordedModelServer([answer_script(args.delay_ms)]).start()
    port = _free_port()
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": model.base_url,
        "ANTHROPIC_API_KEY": "bench",
        "DJANGO_DEBUG": "false",
        "DJANGO_LOG_LEVEL": "WARNING",
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "silvia.asgi:application",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        _wait_port(port)
        print(
            f"database: {'PostgreSQL' if database_url.startswith('postgres') else 'SQLite'}; "
            f"{args.turns} concurrent turns; recorded model pacing {args.delay_ms:g} ms/event"
        )

        # Baseline: the SDK reading the recorded model directly, same concurrency.
        client = anthropic.Anthropic(api_key="bench", base_url=model.base_url, max_retries=0)
        direct: list[float] = []

        def direct_stream() -> None:
            messages = [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "toolu_b1",
                            "name": "read_credit_card_document",
                            "input": {"path": "x"},
                        }
                    ],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_b1", "content": "x"}]},
            ]
            received: list[float] = []
            # Plain dicts, as the service sends them; the SDK types want its TypedDicts.
            with client.messages.stream(model="m", max_tokens=10, messages=messages) as stream:  # type: ignore[arg-type]
                for event in stream:
                    if event.type == "message_start":
                        msg_id = event.message.id
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        received.append(time.perf_counter())
            direct.extend(r - w for r, w in zip(received, model.write_times[msg_id], strict=True))

        _threads([direct_stream] * args.turns)

        # Idle GET p99.
        get_path = f"/api/chat/sessions/{other.id}/"
        idle = [_get(port, get_path, token) for _ in range(200)]

        # The load: concurrent turns, GETs of another session beside them.
        streams = [
            Stream(port, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "fees?"})
            for _ in range(args.turns)
        ]
        loaded: list[float] = []
        stop = threading.Event()

        def getter() -> None:
            while not stop.is_set():
                loaded.append(_get(port, get_path, token))

        getter_thread = threading.Thread(target=getter)
        getter_thread.start()
        _threads([s.run for s in streams])
        stop.set()
        getter_thread.join()

        first_event: list[float] = []
        first_text: list[float] = []
        ours: list[float] = []
        stalls = failed = 0
        for s in streams:
            if not s.events or s.events[-1][1] != "done":
                failed += 1
                continue
            first_event.append(s.events[0][0] - s.started)
            first_text.append(next(t for t, name, _ in s.events if name == "text") - s.started)
            stalls += sum(1 for a, b in zip(s.events, s.events[1:], strict=False) if b[0] - a[0] > 1.0)
            msg_id = next(data["id"] for _, name, data in s.events if name == "message")
            texts = [t for t, name, data in s.events if name == "text" and data["text"] != "\n\n"]
            writes = model.write_times[msg_id]
            ours.extend(r - w for r, w in zip(texts[-len(writes) :], writes, strict=True))

        print(f"\nturns: {len(streams) - failed} done, {failed} failed; stalls (> 1 s gap): {stalls}")
        for label, values in (("first event (turn)", first_event), ("first text", first_text)):
            print(f"  {label:<28}median {ms(statistics.median(values))}  p99 {ms(pct(values, 0.99))}")
        print("added latency per event (model write -> client read):")
        print(f"  baseline: SDK from the model  median {ms(statistics.median(direct))}  p99 {ms(pct(direct, 0.99))}")
        print(
            f"  through our server + event log         median {ms(statistics.median(ours))}  p99 {ms(pct(ours, 0.99))}"
        )
        print(
            f"  added by the server                    median {ms(statistics.median(ours) - statistics.median(direct))}"
        )
        idle_p99, load_p99 = pct(idle, 0.99), pct(loaded, 0.99)
        print(
            f"GET another session: idle p99 {ms(idle_p99)}, under load p99 {ms(load_p99)} ({len(loaded)} GETs); "
            f"ratio {load_p99 / idle_p99:.2f} (goal <= 2)"
        )

        # Replay of a long finished turn.
        turn = LiveTurn.objects.create(
            session_id=uuid.uuid4(),
            user=user,
            user_message="long",
            prompt_version="v5",
            status="done",
            last_seq=args.replay_events,
        )
        LiveTurnEvent.objects.bulk_create(
            LiveTurnEvent(turn=turn, seq=i, event="text", data=json.dumps({"text": f"word {i} "}))
            for i in range(1, args.replay_events + 1)
        )
        replay, trivial = [], []
        for _ in range(20):
            replay.append(_first_byte(port, f"/api/chat/turns/{turn.id}/events?after=0", token))
            trivial.append(_first_byte(port, "/api/chat/sessions/", token))
        print(
            f"replay of a {args.replay_events}-event turn to its first event: median {ms(statistics.median(replay))} "
            f"(goal <= 50 ms); a plain authenticated GET: {ms(statistics.median(trivial))}"
        )

        _event_log_cost(user)
        return 0 if not failed else 1
    finally:
        server.terminate()
        server.wait(10)
        model.stop()


def _event_log_cost(user: Any) -> None:
    from django.db import connection

    from chat.live.events import append_event
    from chat.models import LiveTurn, LiveTurnEvent
    from citations.live_events import text_event

    turn = LiveTurn.objects.create(session_id=uuid.uuid4(), user=user, user_message="cost", prompt_version="v5")
    appended, bare = [], []
    data = {"text": "Your card's a"}
    raw_turn = LiveTurn.objects.create(
        session_id=uuid.uuid4(), user=user, user_message="raw", prompt_version="v5", status="done"
    )
    table = LiveTurnEvent._meta.db_table
    for i in range(1, 1001):
        started = time.perf_counter()
        append_event(turn.id, turn.worker_token, text_event(data["text"]), after=i - 1)
        appended.append(time.perf_counter() - started)
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (turn_id, seq, event, data) VALUES (%s, %s, %s, %s)",
                [raw_turn.id.hex if connection.vendor == "sqlite" else raw_turn.id, i, "text", json.dumps(data)],
            )
        bare.append(time.perf_counter() - started)
    added = statistics.median(appended) - statistics.median(bare)
    print(
        f"event log per event: append_event median {ms(statistics.median(appended))}, bare INSERT "
        f"{ms(statistics.median(bare))}; added {ms(added)} (goal <= 2 ms)"
    )


def _threads(targets: list[Any]) -> None:
    threads = [threading.Thread(target=t) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)


def _get(port: int, path: str, token: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    started = time.perf_counter()
    conn.request("GET", path, headers={"Authorization": f"Token {token}"})
    response = conn.getresponse()
    response.read()
    elapsed = time.perf_counter() - started
    conn.close()
    assert response.status == 200, response.status
    return elapsed


def _first_byte(port: int, path: str, token: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    started = time.perf_counter()
    conn.request("GET", path, headers={"Authorization": f"Token {token}"})
    response = conn.getresponse()
    response.read(1)
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_port(port: int) -> None:
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


if __name__ == "__main__":
    sys.exit(main())
