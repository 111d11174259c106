"""Benchmark: many open event streams on one stream process (issue 30), over HTTP against the Procfile's processes.

    .venv/bin/python bench/live_streams.py                          # 300 and 1,000 streams, PostgreSQL + RabbitMQ
    .venv/bin/python bench/live_streams.py --streams 300 1000 3000 --rounds 3

Setup: a scratch PostgreSQL database (dropped at the end), one process of
the Procfile's `stream:` line (uvicorn; every stream goes to it), one of its
`web:` line (gunicorn; the plain GETs) and `--workers` of its `worker:` line
on RabbitMQ (a queue of the run's own), the recorded model in this process.
Per round and level: `--finished` turns run to their end first; then
`--running` turns start, paced slowly (`--delay-ms` between model events, so
they run for the whole level), each followed by its POST's own stream; then
the level's streams open, at once or evenly over `--ramp-seconds`
(`GET /api/chat/turns/<id>/events`,
`Last-Event-ID: 0`): a fifth replaying the finished turns (each replays and
closes), the rest following the running turns (each replays what is there,
then follows the turn to its end). The clients are asyncio sockets in this
process (one coroutine a stream).

Figures (median and range over the rounds):

- **errors**: a status other than 200, or a stream that ends without its
  turn's `done`;
- **first replayed event**: from sending the request to reading the
  stream's first event, p50 and p99 over the level's streams. Goal p99 <= 1 s at 1,000;
- **RSS growth** of the stream process: its VmRSS with every stream open
  (when the last one has its first event) minus before they opened. Goal <= 300 MiB at 1,000;
  its threads then, beside them;
- **CPU per stream opened** (`cpu ms/open`): the stream process's CPU time
  (user + system) from before the streams open to when the last has its
  first event, over the level's streams (the running turns' sends in that
  time included);
- **GET p99 during**: `GET /api/chat/sessions/<id>` of another session on the
  web process, every 20 ms while the streams are open, against the same GET
  before (idle). Goal <= 3x.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._timing import postgres_server_url  # noqa: E402
from bench.live_turns import (  # noqa: E402
    _get,
    _run_streams,
    answer_script,
    ms,
    pct,
    process_cpu_seconds,
    scratch_database,
)


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(key)


class Follower:
    """One stream read by a coroutine: when its first event came, the events' names, how it ended."""

    def __init__(self, port: int, token: str, turn_id: str) -> None:
        self.port, self.token, self.turn_id = port, token, turn_id
        self.status = 0
        self.first: float | None = None
        self.names: list[str] = []

    async def run(self, opened: asyncio.Event | None = None) -> None:
        started = time.perf_counter()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            self.status = -1
            return
        try:
            writer.write(
                f"GET /api/chat/turns/{self.turn_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Token {self.token}\r\nLast-Event-ID: 0\r\nAccept: text/event-stream\r\n\r\n".encode()
            )
            self.status = int((await reader.readline()).split()[1])
            while (await reader.readline()) not in (b"\r\n", b""):
                pass  # the headers
            buffer = b""
            while self.status == 200:
                size_line = await reader.readline()  # chunked
                size = int(size_line.strip() or b"0", 16)
                if size == 0:
                    break
                buffer += await reader.readexactly(size + 2)
                *frames, buffer = buffer.replace(b"\r\n", b"").split(b"\n\n")
                for frame in frames:
                    event = next((line[7:] for line in frame.split(b"\n") if line.startswith(b"event: ")), None)
                    if event is None:
                        continue
                    if self.first is None:
                        self.first = time.perf_counter() - started
                    self.names.append(event.decode())
                if self.names and self.names[-1] in ("done", "error"):
                    break
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
            self.status = -1
        finally:
            writer.close()

    @property
    def ok(self) -> bool:
        return self.status == 200 and bool(self.names) and self.names[-1] == "done"


async def _open_all(followers: list[Follower], rss: dict[str, float], pid: int, ramp: float) -> None:
    """Open every stream, all at once (`ramp` 0) or evenly over `ramp` seconds; note the stream process's
    RSS, threads and CPU time once each has its first event (or failed)."""
    tasks, started = [], time.perf_counter()
    for index, follower in enumerate(followers):
        if ramp:
            await asyncio.sleep(max(0.0, index * ramp / len(followers) - (time.perf_counter() - started)))
        tasks.append(asyncio.create_task(follower.run()))
    while any(f.first is None and f.status != -1 for f in followers) and not all(t.done() for t in tasks):
        await asyncio.sleep(0.05)
    rss["open"] = _status(pid, "VmRSS")
    rss["threads"] = _status(pid, "Threads")
    rss["cpu"] = process_cpu_seconds(pid)
    await asyncio.gather(*tasks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[300, 1000], help="streams open at once")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--finished", type=int, default=20, help="finished turns whose streams replay")
    parser.add_argument("--running", type=int, default=50, help="running turns the other streams follow")
    parser.add_argument("--delay-ms", type=float, default=250.0, help="the running turns' pacing")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ramp-seconds", type=float, default=0.0, help="open the streams over this long (0: at once)")
    parser.add_argument("--database-url", help="a postgres:// server URL (default: DATABASE_URL, else the local one)")
    args = parser.parse_args(argv)
    with scratch_database(postgres_server_url(args.database_url), "streams") as scratch:
        return run(args, Path(scratch))


def run(args: argparse.Namespace, scratch: Path) -> int:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from chat.models import ChatLog, ChatSession
    from devtools.recorded_model import RecordedModelServer
    from tests.procfile import Stack, rabbitmq_available, rabbitmq_env

    if not rabbitmq_available():
        print("live_streams: needs RabbitMQ (127.0.0.1:5672): skipped")
        return 0
    per_user = 16  # streams one user holds on a running turn, below LIVE_SSE_MAX_STREAMS_PER_USER (20)
    most = max(args.streams)
    users = get_user_model().objects.bulk_create(
        get_user_model()(username=f"s{i:04d}") for i in range(args.finished + args.running + most // per_user + 2)
    )
    tokens = [Token.objects.create(user=user).key for user in users]
    other = ChatSession.objects.create(user=users[0], title="other")
    ChatLog.objects.bulk_create(
        ChatLog(session=other, user=users[0], user_message=f"q{i}", response="a" * 400, prompt_version="v5")
        for i in range(20)
    )
    get_path = f"/api/chat/sessions/{other.id}/"
    model = RecordedModelServer([answer_script(5.0)]).start()
    env = {
        "ANTHROPIC_BASE_URL": model.base_url,
        "ANTHROPIC_API_KEY": "bench",
        "DJANGO_LOG_LEVEL": "WARNING",
        "CELERY_WORKER_CONCURRENCY": str(max(args.running, 20)),
        "LIVE_TURN_THROTTLE_RATE": "100000/minute",
        "LIVE_SSE_MAX_STREAMS_PER_USER": str(per_user + 4),
        **rabbitmq_env(),
    }
    stack = Stack(env, scratch)
    results: dict[int, dict[str, list[float]]] = {n: {} for n in args.streams}
    errors: dict[int, int] = dict.fromkeys(args.streams, 0)
    try:
        stream, web = stack.stream(), stack.web()
        for _ in range(args.workers):
            stack.worker()
        for _ in range(20):
            _get(web.port, get_path, tokens[0])  # warm both gunicorn workers
        print(
            f"1 stream + 1 web + {args.workers} worker processes; {args.finished} finished and {args.running} running "
            f"turns (pacing {args.delay_ms:g} ms/event); {args.rounds} rounds",
            flush=True,
        )
        for round_index in range(args.rounds):
            for level in args.streams:
                model.load([answer_script(5.0)])
                finished = _turns(stream.port, tokens[: args.finished])
                model.load([answer_script(args.delay_ms)])
                owners = tokens[args.finished : args.finished + args.running]
                posts, running = _start_turns(stream.port, owners)
                idle = [_get(web.port, get_path, tokens[0]) for _ in range(30)]
                replaying = level // 5
                followers = [
                    Follower(stream.port, tokens[i % args.finished], finished[i % args.finished])
                    for i in range(replaying)
                ]
                followers += [
                    Follower(stream.port, owners[i % len(owners)], running[i % len(running)])
                    for i in range(level - replaying)
                ]
                loaded: list[float] = []
                stop = threading.Event()

                def getter(stop: threading.Event = stop, loaded: list[float] = loaded) -> None:
                    while not stop.is_set():
                        loaded.append(_get(web.port, get_path, tokens[0]))
                        stop.wait(0.02)

                probe = threading.Thread(target=getter)
                before = _status(stream.process.pid, "VmRSS")
                rss: dict[str, float] = {}
                cpu_before = process_cpu_seconds(stream.process.pid)
                probe.start()
                asyncio.run(_open_all(followers, rss, stream.process.pid, args.ramp_seconds))
                stop.set()
                probe.join()
                for thread in posts:
                    thread.join(600)
                firsts = [f.first for f in followers if f.first is not None]
                errors[level] += sum(1 for f in followers if not f.ok)
                figures = results[level]
                for key, value in (
                    ("first p50", statistics.median(firsts) if firsts else float("nan")),
                    ("first p99", pct(firsts, 0.99)),
                    ("rss MiB", (rss["open"] - before) / 1024),
                    ("threads", float(rss["threads"])),
                    ("cpu ms/open", (rss["cpu"] - cpu_before) * 1000 / level),
                    ("get ratio", pct(loaded, 0.99) / pct(idle, 0.99)),
                    ("get p99 idle", pct(idle, 0.99)),
                    ("get p99 during", pct(loaded, 0.99)),
                ):
                    figures.setdefault(key, []).append(value)
                print(
                    f"  round {round_index + 1}, {level} streams: first p99 {ms(figures['first p99'][-1]).strip()}, "
                    f"RSS +{figures['rss MiB'][-1]:.0f} MiB, errors {sum(1 for f in followers if not f.ok)}",
                    flush=True,
                )
        print(f"\n{'streams':>8} {'errors':>6}  figure (median, range over the rounds)")
        for level in args.streams:
            for key, values in results[level].items():
                line = (
                    f"{_shown(key, statistics.median(values))} ({_shown(key, min(values))}-{_shown(key, max(values))})"
                )
                print(f"{level:>8} {errors[level]:>6}  {key:<15} {line}")
        print("goals at 1,000: errors 0, first p99 <= 1 s, RSS growth <= 300 MiB, GET p99 during <= 3x idle")
        return 1 if any(errors.values()) else 0
    finally:
        stack.close()
        model.stop()


def _shown(key: str, value: float) -> str:
    if key.startswith(("first", "get p99")):
        return ms(value).strip()
    return f"{value:.2f}" if key in ("get ratio", "cpu ms/open") else f"{value:.0f}"


def _turns(port: int, tokens: list[str]) -> list[str]:
    """Run one turn per token to its end; their turn ids."""
    from bench.live_turns import Stream

    streams = [Stream(port, token, come_back=True) for token in tokens]
    _run_streams(streams)
    return [s.events[0][2]["turn_id"] for s in streams if s.ok]


def _start_turns(port: int, tokens: list[str]) -> tuple[list[threading.Thread], list[str]]:
    """Start one turn per token, each POST's stream read on a thread; the threads and the turn ids, once
    each turn sent its first event."""
    from bench.live_turns import Stream

    streams = [Stream(port, token, come_back=True) for token in tokens]
    threads = [threading.Thread(target=s.run) for s in streams]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 120
    while any(not s.events and s.status in (0, 200, 503) for s in streams) and time.monotonic() < deadline:
        time.sleep(0.02)
    return threads, [s.events[0][2]["turn_id"] for s in streams if s.events]


if __name__ == "__main__":
    sys.exit(main())
