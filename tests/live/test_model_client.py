"""`live.model_client.model_client()`: one SDK client per configuration and thread, one TLS context a process."""

from __future__ import annotations

import threading

import httpx2

from live import model_client as module
from live.model_client import model_client


def _in_threads(count: int) -> list[object]:
    """`model_client()` called in `count` new threads, each once; their clients, in thread order."""
    clients: list[object] = [None] * count

    def run(i: int) -> None:
        clients[i] = model_client()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert None not in clients  # a thread that raised
    return clients


def test_a_thread_keeps_its_client_and_other_threads_have_their_own(settings):
    settings.ANTHROPIC_BASE_URL = "http://127.0.0.1:9/one"
    mine = model_client()
    assert model_client() is mine  # the thread's next turn
    others = _in_threads(3)
    assert len({id(client) for client in [mine, *others]}) == 4
    assert all(str(client.base_url) == "http://127.0.0.1:9/one/" for client in others)  # type: ignore[attr-defined]


def test_a_changed_setting_gives_the_thread_a_client_of_its_own(settings):
    settings.ANTHROPIC_BASE_URL, settings.ANTHROPIC_MAX_RETRIES = "http://127.0.0.1:9/one", 2
    before = model_client()
    settings.ANTHROPIC_MAX_RETRIES = 5
    after = model_client()
    assert after is not before
    assert (before.max_retries, after.max_retries) == (2, 5)
    settings.ANTHROPIC_MAX_RETRIES = 2
    assert model_client() is before


def test_the_tls_context_is_built_once_a_process(settings, monkeypatch):
    built: list[object] = []
    create = httpx2.create_ssl_context

    def counted(*args, **kwargs):
        built.append(create(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(module, "_tls", [])  # a process that built none yet
    monkeypatch.setattr(module.httpx2, "create_ssl_context", counted)
    settings.ANTHROPIC_BASE_URL = "https://127.0.0.1:9/tls"  # a configuration no thread has a client of yet
    clients = _in_threads(4)
    assert len({id(client) for client in clients}) == 4
    assert len(built) == 1
