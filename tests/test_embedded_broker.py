"""The embedded broker hands each message over whole, exactly once (issue 28, item 3; silvia/embedded_broker.py).

Real kombu connections on the transport settings configure
(`silvia.embedded_broker:Transport`, kombu's SQLAlchemy transport on a SQLite
file), in a folder of the test's own, from processes started at once.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

from kombu import Connection

QUEUE = "silvia-live-turns"


def _connection(folder: Path) -> Connection:
    return Connection(f"sqlite:///{folder / 'broker.sqlite3'}", transport="silvia.embedded_broker:Transport")


def test_with_no_broker_url_settings_use_the_embedded_transport_polling_every_tenth_of_a_second(tmp_path):
    probe = (
        "import django; django.setup(); from django.conf import settings; from kombu import Connection; "
        "c = Connection(settings.CELERY_BROKER_URL, transport=settings.CELERY_BROKER_TRANSPORT); "
        "print(settings.CELERY_BROKER_EMBEDDED, settings.CELERY_BROKER_URL, type(c.transport).__module__, "
        "c.transport.polling_interval)"
    )
    env = {**os.environ, "CELERY_BROKER_URL": "", "CELERY_BROKER_DIR": str(tmp_path / "b"), "DJANGO_DEBUG": "true"}
    env["DJANGO_SETTINGS_MODULE"] = "silvia.settings"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    # kombu's own default polling interval is 1 s.
    assert out.split() == ["True", f"sqlite:///{tmp_path / 'b' / 'broker.sqlite3'}", "silvia.embedded_broker", "0.1"]
    assert (tmp_path / "b").is_dir()


STARTERS = 8


def _start_and_put(folder: str, barrier, starter: int) -> None:
    barrier.wait(30)  # every process opens the fresh file at the same moment
    with _connection(Path(folder)) as connection:
        connection.SimpleQueue(QUEUE).put({"starter": starter})


def test_processes_opening_a_fresh_broker_file_at_once_all_succeed(tmp_path):
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(STARTERS)
    starters = [spawn.Process(target=_start_and_put, args=(str(tmp_path), barrier, i)) for i in range(STARTERS)]
    for process in starters:
        process.start()
    for process in starters:
        process.join(60)
    assert [process.exitcode for process in starters] == [0] * STARTERS
    with _connection(tmp_path) as connection:
        queue = connection.SimpleQueue(QUEUE)
        got = sorted(queue.get(timeout=5).payload["starter"] for _ in range(STARTERS))
    assert got == list(range(STARTERS))


PRODUCERS, PER_PRODUCER, CONSUMERS = 4, 60, 2


def _body(producer: int, n: int) -> str:
    # Sizes from a few bytes to about 300 KB, so some writes take many system calls.
    return f"{producer}:{n}:" + "é" * ((n * 7919 + producer * 104729) % 150_000)


def _produce(folder: str, producer: int) -> None:
    with _connection(Path(folder)) as connection:
        queue = connection.SimpleQueue(QUEUE)
        for n in range(PER_PRODUCER):
            body = _body(producer, n)
            queue.put({"producer": producer, "n": n, "body": body, "sha": hashlib.sha256(body.encode()).hexdigest()})


def _consume(folder: str, done: str, results: str) -> None:
    got = []
    with _connection(Path(folder)) as connection:
        queue = connection.SimpleQueue(QUEUE)
        while True:
            try:
                message = queue.get(block=True, timeout=0.5)
            except queue.Empty:
                if os.path.exists(done):
                    break
                continue
            payload = message.payload
            whole = hashlib.sha256(payload["body"].encode()).hexdigest() == payload["sha"]
            got.append([payload["producer"], payload["n"], whole])
            message.ack()
    Path(results).write_text(json.dumps(got))


def test_many_messages_put_and_taken_at_once_arrive_each_once_and_whole(tmp_path):
    folder = tmp_path / "broker"
    folder.mkdir()
    done = tmp_path / "producers-done"
    spawn = multiprocessing.get_context("spawn")
    consumers = [
        spawn.Process(target=_consume, args=(str(folder), str(done), str(tmp_path / f"got-{i}.json")))
        for i in range(CONSUMERS)
    ]
    producers = [spawn.Process(target=_produce, args=(str(folder), p)) for p in range(PRODUCERS)]
    for process in consumers + producers:
        process.start()
    for process in producers:
        process.join(120)
        assert process.exitcode == 0
    done.touch()
    started = time.monotonic()
    for process in consumers:
        process.join(120)
        assert process.exitcode == 0
    assert time.monotonic() - started < 60
    got = [item for i in range(CONSUMERS) for item in json.loads((tmp_path / f"got-{i}.json").read_text())]
    assert sorted((p, n) for p, n, _ in got) == [(p, n) for p in range(PRODUCERS) for n in range(PER_PRODUCER)]
    assert all(whole for *_, whole in got)
    assert all(json.loads((tmp_path / f"got-{i}.json").read_text()) for i in range(CONSUMERS))  # both took some
    with _connection(folder) as connection:
        assert connection.SimpleQueue(QUEUE).qsize() == 0
