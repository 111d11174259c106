"""The embedded broker hands each message over whole, exactly once (issue 28, item 3; silvia/embedded_broker.py).

Real kombu connections on the transport (`silvia.embedded_broker:Transport`,
as settings configure it), in a folder of the test's own. No Django.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import tempfile
import threading
import time
from pathlib import Path

import pytest
from kombu import Connection

from silvia import embedded_broker

QUEUE = "silvia-live-turns"


def _connection(folder: Path) -> Connection:
    return Connection(
        "filesystem://localhost//",
        transport="silvia.embedded_broker:Transport",
        transport_options={
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
            "control_folder": str(folder / "control"),
            "polling_interval": 0.01,
        },
    )


def test_a_message_is_not_there_until_it_is_whole(tmp_path, monkeypatch):
    written, go = threading.Event(), threading.Event()
    real_replace = os.replace

    def held_replace(source, destination):
        written.set()
        assert go.wait(10)
        real_replace(source, destination)

    monkeypatch.setattr(embedded_broker.os, "replace", held_replace)
    payload = {"turn": "x" * 200_000}
    with _connection(tmp_path) as producer_side, _connection(tmp_path) as consumer_side:
        putter = threading.Thread(target=lambda: producer_side.SimpleQueue(QUEUE).put(payload))
        putter.start()
        assert written.wait(10)
        # Written whole, under .incoming/, and not yet a message: kombu's own consumer does not see it.
        (partial,) = (tmp_path / embedded_broker.INCOMING).iterdir()
        assert partial.name.endswith(f".{QUEUE}.msg") and partial.stat().st_size > 200_000
        queue = consumer_side.SimpleQueue(QUEUE)
        with pytest.raises(queue.Empty):
            queue.get(block=True, timeout=0.3)
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".msg")] == []
        go.set()
        putter.join(10)
        message = queue.get(block=True, timeout=5)
        assert message.payload == payload
        message.ack()
    assert list((tmp_path / embedded_broker.INCOMING).iterdir()) == []


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


def _consume(folder: str, scratch: str, done: str, results: str) -> None:
    # kombu moves a taken file to the temp folder: keep it on the broker's file system, where the move is a
    # rename (across file systems it is a copy, which two consumers could both make; docs/job-engine.md).
    tempfile.tempdir = scratch
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
    folder, scratch = tmp_path / "broker", tmp_path / "taken"
    folder.mkdir()
    scratch.mkdir()
    done = tmp_path / "producers-done"
    spawn = multiprocessing.get_context("spawn")
    consumers = [
        spawn.Process(target=_consume, args=(str(folder), str(scratch), str(done), str(tmp_path / f"got-{i}.json")))
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
    assert [p.name for p in folder.iterdir() if p.name != "control"] == [embedded_broker.INCOMING]
    assert list((folder / embedded_broker.INCOMING).iterdir()) == []
