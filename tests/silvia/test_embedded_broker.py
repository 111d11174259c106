"""The embedded broker hands each message over whole, exactly once (issue 28, item 3; silvia/embedded_broker.py).

Real kombu connections on the transport settings configure
(`silvia.embedded_broker:Transport`, kombu's SQLAlchemy transport on a SQLite
file), in a folder of the test's own, from processes started at once.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kombu import Connection

QUEUE = "silvia-live-turns"

_PROBE = (
    "import django, json; django.setup(); from django.conf import settings; from kombu import Connection; "
    "c = Connection(settings.CELERY_BROKER_URL, transport=settings.CELERY_BROKER_TRANSPORT); "
    "print(json.dumps([settings.CELERY_BROKER_EMBEDDED, settings.CELERY_BROKER_URL, type(c.transport).__module__, "
    "c.transport.polling_interval, settings.CELERY_BROKER_TRANSPORT_OPTIONS]))"
)


def _settings_with_no_broker_url(broker_dir: Path) -> subprocess.CompletedProcess[str]:
    """What the settings make of `CELERY_BROKER_DIR=broker_dir` and no `CELERY_BROKER_URL`, in a process of its own."""
    env = {**os.environ, "CELERY_BROKER_URL": "", "CELERY_BROKER_DIR": str(broker_dir), "DJANGO_DEBUG": "true"}
    env["DJANGO_SETTINGS_MODULE"] = "silvia.settings"
    return subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True)


def _transport_options() -> dict:
    """The transport options settings give the embedded broker."""
    with tempfile.TemporaryDirectory() as folder:
        return json.loads(_settings_with_no_broker_url(Path(folder)).stdout)[-1]


def _connection(folder: Path, **transport_options: object) -> Connection:
    return Connection(
        f"sqlite:///{folder / 'broker.sqlite3'}",
        transport="silvia.embedded_broker:Transport",
        transport_options=transport_options,
    )


def test_with_no_broker_url_settings_use_the_embedded_transport_polling_every_tenth_of_a_second(tmp_path):
    probe = _settings_with_no_broker_url(tmp_path / "b")
    assert probe.returncode == 0, probe.stderr
    # kombu's own default polling interval is 1 s; SQLite's busy timeout 5 s.
    assert json.loads(probe.stdout) == [
        True,
        f"sqlite:///{tmp_path / 'b' / 'broker.sqlite3'}",
        "silvia.embedded_broker",
        0.1,
        {"connect_args": {"timeout": 30}},
    ]
    assert (tmp_path / "b").is_dir()


def test_a_broker_folder_whose_path_holds_a_question_mark_is_refused_by_name(tmp_path):
    # SQLAlchemy would read what follows `?` as the URL's query and open another file.
    probe = _settings_with_no_broker_url(tmp_path / "q?x=1" / "b")
    assert probe.returncode != 0
    assert f"CELERY_BROKER_DIR '{tmp_path / 'q?x=1' / 'b'}': a path with '?' cannot be used" in probe.stderr
    assert not (tmp_path / "q?x=1").exists()


def _broker_file_descriptors(folder: Path) -> int:
    """This process's open descriptors of `folder`'s broker.sqlite3 (one per SQLite connection to it); other
    tests' broker files (the retention pass prunes the settings' one) keep their pools' connections."""
    count = 0
    own = os.path.realpath(folder / "broker.sqlite3")
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the listing's own descriptor, closed since
            count += os.readlink(f"/proc/self/fd/{fd}") == own
    return count


def test_connections_opened_and_closed_hold_no_database_connection_after_them(tmp_path):
    gc.disable()  # what a cycle collection would close must not be what keeps this bounded
    try:
        for _ in range(20):
            with _connection(tmp_path) as connection:
                connection.connect()
        # One: the pool keeps the connection the first one gave back (a leak held one a connection).
        assert _broker_file_descriptors(tmp_path) <= 1
    finally:
        gc.enable()


def test_a_put_waits_for_a_write_lock_held_longer_than_sqlites_default_5_s(tmp_path):
    with _connection(tmp_path, **_transport_options()) as connection:
        queue = connection.SimpleQueue(QUEUE)  # the file and its tables exist
        holder = sqlite3.connect(tmp_path / "broker.sqlite3", isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN EXCLUSIVE")
        released = threading.Timer(6, holder.execute, args=("COMMIT",))
        released.start()
        try:
            queue.put({"n": 1})  # waits for the lock, then writes
        finally:
            released.join()
            holder.close()
        assert queue.get(timeout=5).payload == {"n": 1}


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
