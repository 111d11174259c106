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


def test_a_ready_worker_leaves_what_it_loaded_out_of_the_collector(db):
    """docs/deploying.md#the-heap-a-process-starts-with: once the worker is ready (the turn runner and the SDK
    loaded, the first sweep run), everything it holds is frozen; the collector is left with almost none."""
    import gc

    from silvia.celery import _worker_ready

    gc.unfreeze()  # whatever this test process froze before (importing silvia.asgi does)
    before = len(gc.get_objects())
    _worker_ready()
    assert before > 10_000 and len(gc.get_objects()) < 100
