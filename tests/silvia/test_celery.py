"""The job engine's app (silvia/celery.py, docs/job-engine.md)."""

from __future__ import annotations

import threading

from celery.backends.base import DisabledBackend

from silvia.celery import app


def test_the_disabled_result_backend_is_one_object_for_every_thread():
    """No results are kept; the stream process queues each turn from a thread of its own, which must not build a
    backend each time (CELERY_RESULT_BACKEND_THREAD_SAFE)."""
    first = app.backend
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(app.backend)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert isinstance(first, DisabledBackend)
    assert len(seen) == 3 and all(backend is first for backend in seen)
