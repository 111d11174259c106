"""Benchmark: bursts of turn POSTs and random SIGKILLs (issue 38 items 4, 6), over HTTP on the Procfile's processes.

    .venv/bin/python bench/burst.py                                   # smoke: a burst of 60, 30 s of chaos
    .venv/bin/python bench/burst.py --levels 300 1000 --chaos-seconds 0
    .venv/bin/python bench/burst.py --levels --chaos-seconds 480 --loops 30 --kill-every 5 10

Setup: a scratch PostgreSQL database (dropped at the end), `--stream-processes`
of the Procfile's `stream:` line (uvicorn, the documented sizing: the POSTs
alternate between them), one of its `web:` line (gunicorn: the session GETs)
and `--workers` of its `worker:` line, on RabbitMQ with a queue of the run's
own (else the embedded broker, which redelivers nothing a killed worker held:
the chaos mode then says so), the recorded model in this process (`--delay-ms`
between stream events, one tool round per turn). Default settings otherwise.

**Burst** (each of `--levels`): that many POSTs sent at once, each from a user
of its own, by asyncio sockets in this process, each stream read to its end.
Printed: the statuses; the status line's time (p50, p99, max: goal every
answer within 2 s); the first event's time (`turn`); refusals (`429`/`503`)
with and without `Retry-After`; admitted streams ended by the server before
their last event (goal 0); the answer time (POST -> `done`, p50/p99); then,
once every turn ended, turns
lost (admitted, not stored `done`), stored twice, client != row (the text
the client holds, each `rewind` applied, against the stored row), 5xx other
than a refusal with `Retry-After`.

**Chaos** (`--chaos-seconds`, 0: none): `--loops` threads each run turns one
after another (POST to a stream process; a stream cut off reconnects with
`Last-Event-ID` to a stream process that answers; a refusal waits its
`Retry-After`; then `GET` of the session on the web process), while every
`--kill-every` seconds (a random time between the two) a random web, stream
or worker process is SIGKILLed and started again. Printed: turns, turns
lost, stored twice, client != row, 5xx, answer time p50/p99, admitted
streams ended by the server (cut by a kill: counted, then reconnected).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import random
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._timing import postgres_server_url  # noqa: E402
from bench.live_turns import answer_script, pct, scratch_database  # noqa: E402

FINAL = ("done", "error")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--levels", type=int, nargs="*", default=[60], help="POSTs at once per burst (none: skip)")
    parser.add_argument("--chaos-seconds", type=float, default=30.0, help="how long the chaos mode runs (0: skip)")
    parser.add_argument("--loops", type=int, default=4, help="chaos: turn loops running at once")
    parser.add_argument("--kill-every", type=float, nargs=2, default=[5.0, 10.0], help="chaos: seconds between kills")
    parser.add_argument("--stream-processes", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--delay-ms", type=float, default=20.0, help="recorded model pacing between events")
    parser.add_argument("--settle-seconds", type=float, default=120.0, help="how long to wait for turns to end")
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--database-url", help="a postgres:// server URL (default: DATABASE_URL, else the local one)")
    args = parser.parse_args(argv)
    with scratch_database(postgres_server_url(args.database_url), "burst") as scratch:
        return run(args, Path(scratch))


class Processes:
    """The Procfile's processes of a run, each kind in a list; `restart(kind, i)` SIGKILLs one and starts another."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        from tests.procfile import start_stream, start_web, start_worker

        self.env, self.folder, self.count = env, folder, 0
        self.starters = {"stream": start_stream, "web": start_web, "worker": start_worker}
        self.running: dict[str, list[Any]] = {"stream": [], "web": [], "worker": []}
        self.lock = threading.Lock()

    def start(self, kind: str) -> Any:
        self.count += 1
        process = self.starters[kind](self.env, self.folder / f"{kind}-{self.count}.log")
        with self.lock:
            self.running[kind].append(process)
        return process

    def kill_one(self, rng: random.Random) -> str:
        kind = rng.choice(["web", "stream", "worker"])
        with self.lock:
            victim = rng.choice(self.running[kind])
            self.running[kind].remove(victim)
        victim.kill()
        self.start(kind)
        return kind

    def ports(self, kind: str) -> list[int]:
        with self.lock:
            return [p.port for p in self.running[kind]]

    def close(self) -> None:
        from tests.procfile import delete_queue

        for processes in self.running.values():
            for process in processes:
                process.terminate()
        for processes in self.running.values():
            for process in processes:
                try:
                    process.process.wait(60)
                except Exception:
                    process.kill()
        delete_queue(self.env)


def run(args: argparse.Namespace, scratch: Path) -> int:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from devtools.recorded_model import RecordedModelServer
    from tests.procfile import embedded_env, rabbitmq_available, rabbitmq_env

    most = max([*args.levels, args.loops, 1])
    users = get_user_model().objects.bulk_create(get_user_model()(username=f"b{i:05d}") for i in range(most))
    tokens = [Token.objects.create(user=user).key for user in users]
    model = RecordedModelServer([answer_script(args.delay_ms)]).start()
    rabbit = rabbitmq_available()
    env = {
        "ANTHROPIC_BASE_URL": model.base_url,
        "ANTHROPIC_API_KEY": "bench",
        "DJANGO_LOG_LEVEL": "WARNING",
        "LIVE_TURN_THROTTLE_RATE": "100000/minute",
        **(rabbitmq_env() if rabbit else embedded_env(scratch / "broker")),
    }
    processes = Processes(env, scratch)
    failed = False
    try:
        for _ in range(args.stream_processes):
            processes.start("stream")
        processes.start("web")
        for _ in range(args.workers):
            processes.start("worker")
        print(
            f"{args.stream_processes} stream + 1 web + {args.workers} worker processes, PostgreSQL, "
            f"{'RabbitMQ' if rabbit else 'the embedded broker'}; model pacing {args.delay_ms:g} ms/event",
            flush=True,
        )
        # Warm, as a deployed process is: one turn through each stream process (its first request loads the
        # views, the broker's connection, ...; its gate learns a slot's usual hold from warm admissions).
        warm = [Client(tokens[0]) for _ in processes.ports("stream")]
        for port, client in zip(processes.ports("stream"), warm, strict=True):
            asyncio.run(_post_async(port, client, time.monotonic()))
        _stored(warm, args.settle_seconds)
        for level in args.levels:
            failed |= burst(level, processes.ports("stream"), tokens[:level], args.settle_seconds)
        if args.chaos_seconds > 0:
            if not rabbit:
                print("chaos: the embedded broker redelivers nothing a killed worker held; RabbitMQ is not up")
            failed |= chaos(args, processes, tokens[: args.loops])
        return 1 if failed else 0
    finally:
        processes.close()
        model.stop()


# --- the clients ---------------------------------------------------------------------------------


class SSEFrame:
    """The SSE lines of one stream read so far: the current event's `id` and name, until its `data` line."""

    def __init__(self) -> None:
        self.seq, self.name = 0, ""

    def line(self, line: bytes, client: Client, started: float) -> bool:
        """Take one line of the stream into `client`; whether the turn is over (the stream can stop here)."""
        if line.startswith(b"id: "):
            self.seq = int(line[4:])
        elif line.startswith(b"event: "):
            self.name = line[7:].strip().decode()
        elif line.startswith(b"data: ") and self.name:
            client.take(self.seq, self.name, line[6:], started)
            return client.over
        return False


class Client:
    """One turn as a client sees it: the POST's status line time and headers, the events read (each `rewind`
    applied by `answer()`), whether the server ended a stream before its last event, and when `done` came."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.message = f"fees? {uuid.uuid4().hex[:12]}"  # one row per message: a turn stored twice shows
        self.session_id = uuid.uuid4()
        self.status = 0
        self.headers: dict[str, str] = {}
        self.answered: float | None = None
        self.finished: float | None = None
        self.first: float | None = None  # when its first event (`turn`) came
        self.events: list[tuple[int, str, Any]] = []
        self.cut = 0  # streams of this turn the server ended before its last event

    @property
    def turn_id(self) -> str | None:
        return self.events[0][2]["turn_id"] if self.events and self.events[0][1] == "turn" else None

    @property
    def last_id(self) -> int:
        return self.events[-1][0] if self.events else 0

    @property
    def over(self) -> bool:
        return bool(self.events) and self.events[-1][1] in FINAL

    def answer(self) -> str:
        text: list[tuple[int, str]] = []
        for seq, name, data in self.events:
            if name == "rewind":
                text = [(i, t) for i, t in text if i <= data["to"]]
            elif name == "text":
                text.append((seq, data["text"]))
        return "".join(t for _, t in text)

    def take(self, seq: int, name: str, data: bytes, started: float) -> None:
        if seq > self.last_id:
            self.events.append((seq, name, json.loads(data)))
            if self.first is None:
                self.first = time.monotonic() - started
            if name in FINAL:
                self.finished = time.monotonic() - started


async def _read_events(reader: asyncio.StreamReader, client: Client, started: float) -> None:
    frame = SSEFrame()
    while line := await reader.readline():
        if frame.line(line, client, started):
            return


async def _post_async(port: int, client: Client, started: float) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        client.status = -1
        return
    body = json.dumps({"message": client.message}).encode()
    writer.write(
        f"POST /api/chat/sessions/{client.session_id}/turns/ HTTP/1.0\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Token {client.token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    try:
        await writer.drain()
        status_line = await reader.readline()
        client.answered = time.monotonic() - started
        client.status = int(status_line.split()[1]) if status_line else -1
        while (line := await reader.readline()) not in (b"\r\n", b""):
            key, _, value = line.decode().partition(":")
            client.headers[key.strip().lower()] = value.strip()
        if client.status == 200:
            await _read_events(reader, client, started)  # HTTP/1.0: no chunks, the stream ends with the connection
            if not client.over:
                client.cut += 1
    except (OSError, ValueError, IndexError):
        client.status = client.status or -1
    finally:
        writer.close()


def _stored(clients: list[Client], settle_seconds: float) -> dict[str, int]:
    """Once every admitted turn ended (or `settle_seconds` passed): lost, stored twice, client != row, not done."""
    from chat.models import ChatLog
    from live.models import ACTIVE_STATUSES, LiveTurn

    admitted = [c for c in clients if c.turn_id]
    ids = [uuid.UUID(c.turn_id) for c in admitted if c.turn_id]
    deadline = time.monotonic() + settle_seconds
    while LiveTurn.objects.filter(pk__in=ids, status__in=ACTIVE_STATUSES).exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    rows = dict(ChatLog.objects.filter(pk__in=ids).values_list("pk", "response"))
    per_message: dict[str, int] = {}
    for message in ChatLog.objects.filter(user_message__in=[c.message for c in clients]).values_list(
        "user_message", flat=True
    ):
        per_message[message] = per_message.get(message, 0) + 1
    statuses = dict(LiveTurn.objects.filter(pk__in=ids).values_list("pk", "status"))
    return {
        "lost": sum(1 for i in ids if i not in rows),
        "stored twice": sum(1 for n in per_message.values() if n > 1),
        "client != row": sum(
            1
            for c in admitted
            if c.over and c.events[-1][1] == "done" and rows.get(uuid.UUID(c.turn_id or "")) != c.answer()
        ),
        "not done": sum(1 for i in ids if statuses.get(i) != "done"),
    }


def _seconds(values: list[float]) -> str:
    if not values:
        return "-"
    return f"p50 {statistics.median(values):.2f} s, p99 {pct(values, 0.99):.2f} s, max {max(values):.2f} s"


# --- burst ---------------------------------------------------------------------------------------


def burst(level: int, ports: list[int], tokens: list[str], settle_seconds: float) -> bool:
    clients = [Client(token) for token in tokens]

    async def all_at_once() -> None:
        started = time.monotonic()
        await asyncio.gather(*(_post_async(ports[i % len(ports)], c, started) for i, c in enumerate(clients)))

    asyncio.run(all_at_once())
    answered = [c.answered for c in clients if c.answered is not None]
    statuses: dict[int, int] = {}
    for c in clients:
        statuses[c.status] = statuses.get(c.status, 0) + 1
    refusals = [c for c in clients if c.status in (429, 503)]
    bare = sum(1 for c in refusals if "retry-after" not in c.headers)
    other_5xx = sum(1 for c in clients if c.status >= 500 and c not in refusals) + bare
    admitted = [c for c in clients if c.status == 200]
    ended_early = sum(1 for c in admitted if c.cut)
    late = sum(1 for value in answered if value > 2.0) + sum(1 for c in clients if c.answered is None)
    store = _stored(clients, settle_seconds)
    print(f"\nburst of {level} POSTs at once over {len(ports)} stream processes", flush=True)
    print(f"  statuses             {dict(sorted(statuses.items()))}")
    print(f"  status line          {_seconds(answered)}; later than 2 s or never: {late}")
    print(f"  refusals             {len(refusals)} ({bare} without Retry-After)")
    print(f"  admitted             {len(admitted)}; streams ended by the server before their last event: {ended_early}")
    firsts = [c.first for c in admitted if c.first is not None]
    print(f"  first event (turn)   {_seconds(firsts)}; admitted with none: {len(admitted) - len(firsts)}")
    print(f"  answer time (done)   {_seconds([c.finished for c in admitted if c.finished is not None])}")
    print(
        f"  turns lost {store['lost']}, stored twice {store['stored twice']}, client != row {store['client != row']}, "
        f"admitted not done {store['not done']}, 5xx {other_5xx}"
    )
    return bool(late or ended_early or other_5xx or store["lost"] or store["stored twice"] or store["client != row"])


# --- chaos ---------------------------------------------------------------------------------------


def _request(port: int, method: str, path: str, token: str, body: str | None, extra: dict[str, str], client: Client):
    """One request on a thread's socket; for a 200 stream, its events read into `client`. The status (-1: the
    connection failed or was cut) and the response's headers."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json", **extra}
    started = time.monotonic()
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        if response.status != 200 or not response.getheader("content-type", "").startswith("text/event-stream"):
            response.read()
            return response.status, dict(response.getheaders())
        frame = SSEFrame()
        while line := response.readline():
            if frame.line(line, client, started):
                break
        if not client.over:
            client.cut += 1
        return 200, dict(response.getheaders())
    except (OSError, http.client.HTTPException):
        if client.events and not client.over:
            client.cut += 1
        return -1, {}
    finally:
        conn.close()


def _one_turn(processes: Processes, token: str, rng: random.Random, stop_at: float, fives: list[int]) -> Client:
    client = Client(token)
    started = time.monotonic()
    body = json.dumps({"message": client.message})
    while not client.turn_id and time.monotonic() < stop_at + 60:
        status, headers = _request(
            _port(processes, "stream", rng),
            "POST",
            f"/api/chat/sessions/{client.session_id}/turns/",
            token,
            body,
            {},
            client,
        )
        if status >= 500 and "Retry-After" not in headers and "retry-after" not in headers:
            fives.append(status)
        if status == 409:
            break  # a POST that reached the service after all: its turn runs; found by its message at the end
        if not client.turn_id:
            time.sleep(float(headers.get("Retry-After", headers.get("retry-after", "0.5"))) if status > 0 else 0.5)
    while client.turn_id and not client.over and time.monotonic() < stop_at + 120:
        status, headers = _request(
            _port(processes, "stream", rng),
            "GET",
            f"/api/chat/turns/{client.turn_id}/events",
            token,
            None,
            {"Last-Event-ID": str(client.last_id)},
            client,
        )
        if status >= 500 and "Retry-After" not in headers and "retry-after" not in headers:
            fives.append(status)
        if status == 204:
            break
        if not client.over:
            time.sleep(0.3)
    client.finished = time.monotonic() - started if client.over else None
    for _ in range(50):  # the session as the web process serves it
        status, _ = _request(
            _port(processes, "web", rng),
            "GET",
            f"/api/chat/sessions/{client.session_id}/",
            token,
            None,
            {},
            Client(token),
        )
        if status > 0 and status < 500:
            break
        if status >= 500:
            fives.append(status)
        time.sleep(0.2)
    return client


def _port(processes: Processes, kind: str, rng: random.Random) -> int:
    """A running `kind` process's port; while every one of that kind is being started again after a kill, wait
    for one (at most 60 s: a process that does not come back ends the run)."""
    deadline = time.monotonic() + 60
    while not (ports := processes.ports(kind)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {kind} process came back within 60 s")
        time.sleep(0.1)
    return rng.choice(ports)


def chaos(args: argparse.Namespace, processes: Processes, tokens: list[str]) -> bool:
    rng = random.Random(args.seed)
    stop_at = time.monotonic() + args.chaos_seconds
    clients: list[Client] = []
    fives: list[int] = []
    kills: dict[str, int] = {}
    lock = threading.Lock()

    def loop(token: str, seed: int) -> None:
        own = random.Random(seed)
        while time.monotonic() < stop_at:
            client = _one_turn(processes, token, own, stop_at, fives)
            with lock:
                clients.append(client)

    threads = [threading.Thread(target=loop, args=(t, args.seed + i), daemon=True) for i, t in enumerate(tokens)]
    for thread in threads:
        thread.start()
    while time.monotonic() < stop_at:
        time.sleep(rng.uniform(*args.kill_every))
        if time.monotonic() >= stop_at:
            break
        kind = processes.kill_one(rng)
        kills[kind] = kills.get(kind, 0) + 1
    for thread in threads:
        thread.join(args.settle_seconds + 120)
    store = _stored(clients, args.settle_seconds)
    answers = [c.finished for c in clients if c.finished is not None]
    print(
        f"\nchaos: {args.chaos_seconds:g} s, {len(tokens)} turn loops, kills {dict(sorted(kills.items()))}", flush=True
    )
    print(
        f"  turns {len(clients)}, admitted {sum(1 for c in clients if c.turn_id)}, answered to the end "
        f"{sum(1 for c in clients if c.over)}"
    )
    print(
        f"  turns lost {store['lost']}, stored twice {store['stored twice']}, client != row "
        f"{store['client != row']}, not done {store['not done']}, 5xx {len(fives)}"
    )
    print(f"  answer time          {_seconds(answers)}")
    print(f"  admitted streams ended by the server (then reconnected): {sum(c.cut for c in clients)}")
    return bool(store["lost"] or store["stored twice"] or store["client != row"] or fives)


if __name__ == "__main__":
    sys.exit(main())
