"""`live.model_client.model_client()`: SDK clients lent one caller at a time, the last given back lent first,
one TLS context a process."""

from __future__ import annotations

import threading

import httpx2

from live import model_client as module
from live.model_client import model_client


def _at_once(count: int) -> list[object]:
    """The clients `count` threads borrow at the same time (each holds its own until all have one)."""
    clients: list[object] = [None] * count
    all_hold = threading.Barrier(count, timeout=30)

    def run(i: int) -> None:
        with model_client() as client:
            clients[i] = client
            all_hold.wait()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert None not in clients  # a thread that raised
    return clients


def test_a_client_is_lent_to_one_caller_at_a_time_and_the_last_given_back_first(settings):
    settings.ANTHROPIC_BASE_URL = "http://127.0.0.1:9/lent"
    with model_client() as outer, model_client() as inner:
        assert inner is not outer
    # `inner` went back first, then `outer`: `outer` is on top.
    with model_client() as first:
        assert first is outer
    with model_client() as again:
        assert again is outer  # one caller after another: the same client, its connection kept


def test_callers_at_once_each_have_one_and_then_one_serves_them_all(settings):
    settings.ANTHROPIC_BASE_URL = "http://127.0.0.1:9/at-once"
    clients = _at_once(4)
    assert len({id(client) for client in clients}) == 4
    assert all(str(client.base_url) == "http://127.0.0.1:9/at-once/" for client in clients)  # type: ignore[attr-defined]
    one_after_another = []

    def borrow() -> None:
        with model_client() as client:
            one_after_another.append(client)

    for _ in range(3):
        thread = threading.Thread(target=borrow)
        thread.start()
        thread.join(timeout=30)
    assert len(one_after_another) == 3
    assert len({id(client) for client in one_after_another}) == 1  # the one given back last, each time
    assert one_after_another[0] in clients


def test_a_changed_setting_lends_a_client_of_that_configuration(settings):
    settings.ANTHROPIC_BASE_URL, settings.ANTHROPIC_MAX_RETRIES = "http://127.0.0.1:9/settings", 2
    with model_client() as before:
        pass
    settings.ANTHROPIC_MAX_RETRIES = 5
    with model_client() as after:
        assert after is not before
        assert (before.max_retries, after.max_retries) == (2, 5)
    settings.ANTHROPIC_MAX_RETRIES = 2
    with model_client() as back:
        assert back is before


def test_the_tls_context_is_built_once_a_process(settings, monkeypatch):
    built: list[object] = []
    create = httpx2.create_ssl_context

    def counted(*args, **kwargs):
        built.append(create(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(module, "_tls", [])  # a process that built none yet
    monkeypatch.setattr(module.httpx2, "create_ssl_context", counted)
    settings.ANTHROPIC_BASE_URL = "https://127.0.0.1:9/tls"  # a configuration with no client yet
    clients = _at_once(4)
    assert len({id(client) for client in clients}) == 4
    assert len(built) == 1
