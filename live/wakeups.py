"""Waking the streams that follow a turn (docs/live.md#how-a-stream-wakes).

The statement that appends a worker's events also sends `NOTIFY
silvia_live_turns` (PostgreSQL, `live.db.append_batch`), the payload being
the turn id, then the events one a line when they fit (`notify_payload`).
Each server process holds one `LISTEN` connection per event loop, a
coroutine of `TurnFeeds`, which hands each notification to the streams of
that process that follow the turn (`TurnFeeds.follow`): a stream waits on
its feed, so it costs a coroutine and a queue, no thread and no database
connection, and sends the carried events without reading the log. A
notification that names no events, and the listener's reconnection (it may
have missed some), tell the streams to read the log. On SQLite streams poll.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from typing import Any

__all__ = [
    "MAX_PAYLOAD_BYTES",
    "NOTIFY_CHANNEL",
    "Feed",
    "TurnFeeds",
    "notify_payload",
    "parse_payload",
    "stop_listener",
    "turn_feeds",
]

logger = logging.getLogger(__name__)

NOTIFY_CHANNEL = "silvia_live_turns"

#: PostgreSQL refuses a NOTIFY payload of 8000 bytes or more.
MAX_PAYLOAD_BYTES = 7900

#: `(seq, event, data)`: one event of the log.
Row = tuple[int, str, str]


def notify_payload(turn_id: uuid.UUID, rows: list[Row] | None) -> str:
    """`<turn id>`, then `<seq> <event> <data>` per event, one a line (the JSON `data` holds no raw newline).

    The turn id alone when there are no rows or they do not fit: the streams read the log.
    """
    if rows:
        payload = "\n".join([str(turn_id), *(f"{seq} {event} {data}" for seq, event, data in rows)])
        if len(payload) <= MAX_PAYLOAD_BYTES // 4 or len(payload.encode()) <= MAX_PAYLOAD_BYTES:
            return payload
    return str(turn_id)


def parse_payload(payload: str) -> tuple[str, list[Row] | None]:
    """A `notify_payload`: the turn id and its events (None when it names none, or when a line is not
    `<seq> <event> <data>`: a payload of someone else's on the channel, so the streams read the log)."""
    turn_id, _, lines = payload.partition("\n")
    if not lines:
        return turn_id, None
    rows = []
    for line in lines.split("\n"):
        seq, _, rest = line.partition(" ")
        event, _, data = rest.partition(" ")
        if not seq.isdigit() or not event or not data:
            return turn_id, None
        rows.append((int(seq), event, data))
    return turn_id, rows


class Feed(asyncio.Queue[list[Row] | None]):
    """What one stream is told about its turn: the events a notification carried, or None (read the log)."""


class TurnFeeds:
    """The feeds of one event loop's streams, by turn, and the loop's `LISTEN` connection feeding them.

    `follow(turn_id)` before reading the log (so nothing notified meanwhile
    is missed), `unfollow(feed)` when the stream ends. The listener starts
    with the first feed and stays; it reconnects after a lost connection (a
    second later), and then tells every feed to read the log.
    """

    def __init__(self, connect_params: dict[str, Any] | None) -> None:
        self.connect_params = connect_params  # None: no listener (notifications are dispatched by the caller)
        self._feeds: dict[str, set[Feed]] = {}
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    def follow(self, turn_id: uuid.UUID) -> Feed:
        if self.connect_params is not None and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._listen(), name="live-turn-listener")
        feed = Feed()
        self._feeds.setdefault(str(turn_id), set()).add(feed)
        return feed

    def unfollow(self, turn_id: uuid.UUID, feed: Feed) -> None:
        feeds = self._feeds.get(str(turn_id))
        if feeds is not None:
            feeds.discard(feed)
            if not feeds:
                del self._feeds[str(turn_id)]

    def following(self) -> int:
        """How many streams follow a turn here."""
        return sum(len(feeds) for feeds in self._feeds.values())

    def dispatch(self, payload: str) -> None:
        """Hand one notification to the feeds of its turn."""
        turn_id, rows = parse_payload(payload)
        for feed in self._feeds.get(turn_id, ()):
            feed.put_nowait(rows)

    def _read_the_log(self) -> None:
        for feeds in self._feeds.values():
            for feed in feeds:
                feed.put_nowait(None)

    async def _listen(self) -> None:
        import psycopg

        while True:
            try:
                params = self.connect_params or {}
                async with await psycopg.AsyncConnection.connect(**params, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self.connected.set()
                    self._read_the_log()  # what was notified before LISTEN took effect
                    async for note in conn.notifies():
                        self.dispatch(note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a lost connection: streams read the log once it is back
                logger.warning("live turn listener lost its connection (%s); reconnecting", type(error).__name__)
            self.connected.clear()
            await asyncio.sleep(1)

    def stop(self) -> None:
        if self._task is not None:
            self._task.get_loop().call_soon_threadsafe(self._task.cancel)
            self._task = None


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TurnFeeds] = weakref.WeakKeyDictionary()


def listener_params() -> dict[str, Any]:
    """psycopg's connection arguments for the default database, as Django connects (libpq's keywords only)."""
    from django.db import connections

    from finance.libpq import libpq_params

    return libpq_params(connections["default"].settings_dict)


def turn_feeds() -> TurnFeeds:
    """This event loop's `TurnFeeds` (made with the first stream that follows a turn on it)."""
    loop = asyncio.get_running_loop()
    feeds = _by_loop.get(loop)
    if feeds is None:
        feeds = _by_loop[loop] = TurnFeeds(listener_params())
    return feeds


def stop_listener() -> None:
    """Stop every loop's listener of this process (tests, before dropping their database)."""
    for feeds in list(_by_loop.values()):
        feeds.stop()
