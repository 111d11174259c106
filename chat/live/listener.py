"""PostgreSQL `LISTEN` for live turns: one connection per server process.

Workers `NOTIFY silvia_live_turns` in the transaction that appends events
(`chat.live.events.append_events`), the payload being the turn id, then the
events one a line when they fit (`chat.live.events.notify_payload`). This
thread forwards each notification to the in-process notifier (with its
events, for a turn that a stream of this process follows), so a stream
served by any process wakes within milliseconds and sends those events
without reading the log. On SQLite there is no listener: tails poll.
"""

from __future__ import annotations

import logging
import threading

import psycopg
from django.db import connections

from chat.live.events import NOTIFY_CHANNEL, notifier, parse_payload

logger = logging.getLogger(__name__)

_started = False
_lock = threading.Lock()
_stop = threading.Event()
_thread: threading.Thread | None = None


def ensure_listener() -> bool:
    """Start this process's listener thread once (PostgreSQL only). True when one runs."""
    global _started, _thread
    if connections["default"].vendor != "postgresql":
        return False
    with _lock:
        if not _started:
            params = connections["default"].get_connection_params()
            _stop.clear()
            _thread = threading.Thread(target=_listen_forever, args=(params,), name="live-turn-listener", daemon=True)
            _thread.start()
            _started = True
    return True


def stop_listener() -> None:
    """Stop this process's listener and close its connection (tests, before dropping their database)."""
    global _started
    with _lock:
        thread, _started = _thread, False
    _stop.set()
    if thread is not None:
        thread.join(5)


def _listen_forever(params: dict) -> None:
    params = {key: value for key, value in params.items() if key not in ("cursor_factory", "context")}
    while not _stop.is_set():
        try:
            with psycopg.connect(**params, autocommit=True) as conn:
                conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                while not _stop.is_set():
                    for note in conn.notifies(timeout=0.5):
                        turn_id = note.payload.partition("\n")[0]
                        if notifier.watching(turn_id):  # the events matter only to a stream here
                            notifier.notify(*parse_payload(note.payload))
                        else:
                            notifier.notify(turn_id)
        except Exception:  # a lost connection: tails still poll meanwhile
            logger.warning("live turn listener lost its connection; reconnecting", exc_info=True)
            _stop.wait(1)
