"""Stopping a live turn (SPEC 16, docs/live.md#stopping-a-turn): the user's stop, and the worker letting go.

`turn_stop(user=, turn_id=)` ends the caller's queued or running turn at
once, in the database: `failed`, with an `error` event `{"type": "stopped"}`
after its last event (so every stream of it ends with that event), its
checkpoint dropped (what streamed is not stored as an answer), the session
free for a new turn. It is the only write: a worker's writes are fenced by
its token and the `running` status (`LiveTurnQuerySet.running_for_worker`),
so whatever the worker does next is refused (`LostTurnError`).

The worker lets go promptly, whatever stage it is at. While the model
streams, its next event batch is refused (within `LIVE_TURN_FLUSH_SECONDS`).
A model that is quiet (thinking, writing a long tool input) or a tool that
runs long would keep it until the next event; so each process that runs
turns has one watcher thread (`watching`) that reads, every
`LIVE_TURN_STOP_POLL_SECONDS`, whether the turns it runs are still its own,
and for a turn that is not: shuts the model request's socket down
(`closing_on_stop`: httpx's documented `network_stream` extension), and
lets the turn's thread stop waiting for its tool (`result_unless_stopped`;
the tool's own thread ends within its time limit, its result unused). When
the run ends, a log line says how long after the stop the worker let go
(`turn … stopped by its user: its worker let go … ms after the stop`); the
row is read for it only when the run lost its turn (the watcher saw it, or a
write was refused: `turn_lost`), not after every turn.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
from django.utils import timezone

from live.engine import fail_unstarted
from live.log import LostTurnError, release_connection, turn_fail
from live.models import ACTIVE_STATUSES, LiveTurn, LiveTurnStatus

__all__ = [
    "STOPPED",
    "STOPPED_MESSAGE",
    "TurnEndedError",
    "TurnNotFoundError",
    "closing_on_stop",
    "result_unless_stopped",
    "turn_lost",
    "turn_stop",
    "watching",
]

logger = logging.getLogger(__name__)

#: The `error` event's type of a stopped turn, and what its user reads.
STOPPED = "stopped"
STOPPED_MESSAGE = "You stopped this answer."


class TurnNotFoundError(Exception):
    """No such turn of the caller's (another user's is the same: a 404)."""


class TurnEndedError(Exception):
    """The turn already ended (`done` or `failed`): nothing to stop (a 409)."""


def turn_stop(*, user: Any, turn_id: uuid.UUID) -> LiveTurn:
    """Stop the caller's queued or running turn `turn_id` (SPEC 16); the turn, now `failed`.

    Its `error` event `{"type": "stopped", "message"}` ends its streams; its
    checkpoint is dropped; no `ai_chat_logs` row is written for it (a worker
    finishing at the same moment either committed first, and this raises
    `TurnEndedError`, or its save is refused and rolled back). Raises
    `TurnNotFoundError` (not the caller's, or missing) and `TurnEndedError`.
    """
    owned = LiveTurn.objects.filter(pk=turn_id, user_id=user.pk)
    if not owned.exists():
        raise TurnNotFoundError(str(turn_id))
    for _ in range(5):  # queued -> running between two tries: try again
        if fail_unstarted(turn_id, STOPPED, STOPPED_MESSAGE) or turn_fail(
            turn_id, kind=STOPPED, message=STOPPED_MESSAGE
        ):
            break
        status = owned.values_list("status", flat=True).first()
        if status is None or status not in ACTIVE_STATUSES:
            raise TurnEndedError(str(turn_id))
    else:
        raise TurnEndedError(str(turn_id))
    # The partial state goes: a stopped answer is not kept, not even for inspection.
    owned.filter(status=LiveTurnStatus.FAILED).update(checkpoint=None)
    turn = owned.get()
    if turn.started_at is not None:  # a queued one was counted by fail_unstarted
        from telemetry import metrics  # with the first stop, not at start-up

        seconds = (timezone.now() - turn.created_at).total_seconds()
        metrics.turn_finished(outcome="failed", error_type=STOPPED, seconds=seconds)
    logger.info("turn %s stopped by its user", turn_id)
    return turn


class _Watch:
    """One running turn a worker watches: `stopped` completes when the turn is no longer this worker's."""

    def __init__(self, turn_id: uuid.UUID, token: uuid.UUID) -> None:
        self.turn_id, self.token = turn_id, token
        self.stopped: concurrent.futures.Future[bool] = concurrent.futures.Future()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._lock = threading.Lock()
        self._next = 0

    def fire(self) -> None:
        with self._lock:
            if self.stopped.done():
                return
            self.stopped.set_result(True)
            callbacks = list(self._callbacks.values())
        for callback in callbacks:
            try:
                callback()
            except Exception as error:  # a socket already closed, ...: the fence stops the worker anyway
                logger.debug("turn %s: a stop callback failed (%s)", self.turn_id, type(error).__name__)

    @contextlib.contextmanager
    def on_stop(self, callback: Callable[[], None]) -> Iterator[None]:
        """Call `callback` (from the watcher's thread) if the turn is stopped while inside; at once if it was."""
        with self._lock:
            key, self._next = self._next, self._next + 1
            self._callbacks[key] = callback
            already = self.stopped.done()
        if already:
            callback()
        try:
            yield
        finally:
            with self._lock:
                self._callbacks.pop(key, None)


class _Watcher:
    """One thread per process reading whether the turns it runs are still their workers' own."""

    def __init__(self) -> None:
        self._watches: dict[uuid.UUID, _Watch] = {}
        self._lock = threading.Lock()
        self._busy = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, watch: _Watch) -> None:
        with self._lock:
            self._watches[watch.turn_id] = watch
            self._busy.set()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="live-turn-stops", daemon=True)
                self._thread.start()

    def discard(self, watch: _Watch) -> None:
        with self._lock:
            if self._watches.get(watch.turn_id) is watch:
                del self._watches[watch.turn_id]
            if not self._watches:
                self._busy.clear()

    def get(self, turn_id: uuid.UUID) -> _Watch | None:
        with self._lock:
            return self._watches.get(turn_id)

    def poll(self) -> None:
        """One read: fire the watch of every turn that is not running with its watcher's token any more."""
        with self._lock:
            watches = list(self._watches.values())
        if not watches:
            return
        try:
            held = dict(
                LiveTurn.objects.filter(pk__in=[w.turn_id for w in watches], status=LiveTurnStatus.RUNNING)
                .values_list("pk", "worker_token")
                .order_by()
            )
        finally:
            release_connection()
        for watch in watches:
            if held.get(watch.turn_id) != watch.token:
                watch.fire()

    def _run(self) -> None:
        while True:
            self._busy.wait()
            try:
                self.poll()
            except Exception as error:  # the database is away for a moment: the fence still holds
                logger.warning("the stop watcher could not read its turns (%s)", type(error).__name__)
            time.sleep(settings.LIVE_TURN_STOP_POLL_SECONDS)


_watcher = _Watcher()


@contextlib.contextmanager
def watching(turn_id: uuid.UUID, token: uuid.UUID) -> Iterator[None]:
    """Watch the turn while a worker runs it with `token`; at the end, log how long after a stop it let go."""
    watch = _Watch(turn_id, token)
    _watcher.add(watch)
    try:
        yield
    finally:
        _watcher.discard(watch)
        if watch.stopped.done():
            _report_let_go(turn_id)


def turn_lost(turn_id: uuid.UUID) -> None:
    """The worker found the turn it runs no longer its own (a write refused: `LostTurnError`; SPEC 16, a stop)
    before the watcher read it: its watch fires, as the watcher's would have, so `watching` reads the row for
    its let-go line. A no-op outside `watching`; never raises (a failing stop callback is logged by class)."""
    watch = _watcher.get(turn_id)
    if watch is not None:
        watch.fire()


def _report_let_go(turn_id: uuid.UUID) -> None:
    """A log line for a turn its user stopped: how long after the stop its worker let go (the last it did)."""
    try:
        row = LiveTurn.objects.filter(pk=turn_id).values_list("error", "finished_at").first()
    except Exception:
        return
    finally:
        release_connection()
    if row is None:
        logger.info("turn %s was deleted while it ran: its worker let go", turn_id)
        return
    error, finished_at = row
    if isinstance(error, dict) and error.get("type") == STOPPED and finished_at is not None:
        after = (timezone.now() - finished_at).total_seconds() * 1000
        logger.info("turn %s stopped by its user: its worker let go %.0f ms after the stop", turn_id, after)


@contextlib.contextmanager
def closing_on_stop(turn_id: uuid.UUID, response: Any) -> Iterator[None]:
    """Inside, a stop of the turn shuts the model request's socket down (`response`: an httpx response, its
    `network_stream` extension), so a read that waits on a quiet model ends at once; whatever the broken
    read raises then leaves as `LostTurnError`."""
    watch = _watcher.get(turn_id)
    if watch is None:
        yield
        return
    with watch.on_stop(lambda: _shut_down(response)):
        try:
            yield
        except LostTurnError:
            raise
        except Exception:
            if watch.stopped.done():
                raise LostTurnError(str(turn_id)) from None
            raise


def _shut_down(response: Any) -> None:
    stream = getattr(response, "extensions", {}).get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in recv(); close() from here would not
    else:
        response.close()


def result_unless_stopped(future: concurrent.futures.Future[Any], *, turn_id: uuid.UUID, timeout: float) -> Any:
    """`future.result(timeout)`, unless the turn is stopped first: then `LostTurnError` at once (the tool's
    thread ends within its own limit; its result is not used)."""
    watch = _watcher.get(turn_id)
    if watch is None:
        return future.result(timeout=timeout)
    concurrent.futures.wait([future, watch.stopped], timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED)
    if watch.stopped.done() and not future.done():
        raise LostTurnError(str(turn_id))
    return future.result(timeout=0)
