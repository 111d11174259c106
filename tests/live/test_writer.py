"""A worker writes a turn's events in batches (docs/live.md#how-a-turn-runs-the-event-log-checkpoints-resume).

`live.writer.EventWriter` on the test database, in this process: text
that comes within one write is merged before it gets its id, a batch is one
write, what a quiet model leaves held is written by the flusher thread, and
a turn taken over by another worker is reported to the turn's thread.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import orjson
import pytest

from citations.live_events import citation_event, text_event
from live.engine import turn_acquire
from live.log import LostTurnError
from live.models import LiveTurn, LiveTurnEvent
from live.wakeups import TurnFeeds, notify_payload, parse_payload
from live.writer import EventWriter, batch_interval

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("turns", "least", "expected"),
    [
        (1, 0.05, 0.05),
        (10, 0.05, 0.05),
        (20, 0.05, 0.1),
        (40, 0.05, 0.2),
        (50, 0.05, 0.25),
        (100, 0.05, 0.25),
        (100, 0.5, 0.5),
        (100, 0.0, 0.0),
    ],
)
def test_the_batch_interval_grows_with_the_turns_of_the_process_to_its_bound(settings, turns, least, expected):
    """At most 200 batches a second in all (LIVE_TURN_BATCHES_PER_SECOND), up to 0.25 s, never below `least`."""
    settings.LIVE_TURN_BATCHES_PER_SECOND, settings.LIVE_TURN_FLUSH_MAX_SECONDS = 200, 0.25
    assert batch_interval(turns, least=least) == pytest.approx(expected)


def test_with_no_rate_the_interval_stays_the_least(settings):
    settings.LIVE_TURN_BATCHES_PER_SECOND = 0
    assert batch_interval(500, least=0.05) == 0.05


def test_a_writer_s_interval_follows_the_writers_of_its_process(settings, maya):
    settings.LIVE_TURN_FLUSH_SECONDS, settings.LIVE_TURN_BATCHES_PER_SECOND = 0.05, 200
    settings.LIVE_TURN_FLUSH_MAX_SECONDS = 0.25
    turn, token = running_turn(maya)
    writers = [EventWriter(turn.id, token, after=1) for _ in range(30)]  # 30 turns' writers, with the test's own
    try:
        assert writers[0].interval() == pytest.approx(0.15)
    finally:
        for writer in writers:
            writer.close()
    alone = EventWriter(turn.id, token, after=1)
    try:
        assert alone.interval() == 0.05
    finally:
        alone.close()


def running_turn(user) -> tuple[LiveTurn, uuid.UUID]:
    turn = LiveTurn.objects.create(session_id=uuid.uuid4(), user=user, user_message="hi", prompt_version="v5")
    LiveTurnEvent.objects.create(turn=turn, seq=1, event="turn", data="{}")
    LiveTurn.objects.filter(pk=turn.pk).update(last_seq=1)
    token = turn_acquire(turn.id)
    assert token is not None
    return turn, token


def log(turn: LiveTurn) -> list[tuple[int, str, object]]:
    rows = LiveTurnEvent.objects.filter(turn=turn).order_by("seq").values_list("seq", "event", "data")
    return [(seq, name, orjson.loads(data)) for seq, name, data in rows]


def wait_for_log(turn: LiveTurn, seq: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while LiveTurn.objects.get(pk=turn.pk).last_seq < seq:
        assert time.monotonic() < deadline, f"event {seq} was not written"
        time.sleep(0.01)


def test_text_within_one_write_is_one_event_and_a_quiet_model_leaves_nothing_held(maya):
    turn, token = running_turn(maya)
    writer = EventWriter(turn.id, token, after=1, interval=1.0)
    try:
        writer.put(text_event("You "))  # after a quiet spell: written at once
        assert writer.written == 2
        writer.put(text_event("owe "))
        writer.put(text_event("$1,500."))
        cite = {"source": "silvia://your-account/credit-card", "cited_text": "balance: 1200", "start": 0, "end": 15}
        writer.put(citation_event(cite))
        writer.put(text_event(" That"))
        writer.put(text_event(" is all."))
        assert writer.written == 2 and LiveTurn.objects.get(pk=turn.pk).last_seq == 2  # held
        # Nothing more comes: the flusher writes what is held once the interval has passed.
        wait_for_log(turn, 5)
        assert log(turn) == [
            (1, "turn", {}),
            (2, "text", {"text": "You "}),
            (3, "text", {"text": "owe $1,500."}),
            (4, "citation", {"citation": cite}),
            (5, "text", {"text": " That is all."}),
        ]
        deadline = time.monotonic() + 10
        while writer.written != 5:  # the flusher sets it when its write returns, a moment after the rows commit
            assert time.monotonic() < deadline, f"written is {writer.written}"
            time.sleep(0.01)
        writer.put(text_event("More."))  # held until flushed: the interval has not passed since the batch
        writer.flush()
        assert writer.written == 6 and log(turn)[-1] == (6, "text", {"text": "More."})
    finally:
        writer.close()


def test_with_no_interval_each_event_is_written_as_it_comes(maya):
    turn, token = running_turn(maya)
    writer = EventWriter(turn.id, token, after=1, interval=0)
    try:
        for piece in ("a", "b", "c"):
            writer.put(text_event(piece))
        assert writer.written == 4
        assert [entry[2] for entry in log(turn)[1:]] == [{"text": "a"}, {"text": "b"}, {"text": "c"}]
    finally:
        writer.close()


def test_a_turn_taken_over_while_its_events_were_held_stops_its_thread_at_the_next_event(maya):
    turn, token = running_turn(maya)
    writer = EventWriter(turn.id, token, after=1, interval=0.2)
    try:
        writer.put(text_event("first"))
        writer.put(text_event(" held"))
        assert turn_acquire(turn.id) not in (None, token)  # a redelivery: another worker owns the turn
        time.sleep(0.6)  # the flusher tried the held batch, and was refused
        with pytest.raises(LostTurnError):
            writer.put(text_event(" late"))
        with pytest.raises(LostTurnError):
            writer.flush()
        assert log(turn) == [(1, "turn", {}), (2, "text", {"text": "first"})]
    finally:
        writer.close()


def test_a_notify_payload_carries_a_batch_that_fits_and_only_the_turn_id_otherwise():
    turn_id = uuid.uuid4()
    rows = [(7, "text", '{"text":"a b\\nc \\u2028"}'), (8, "citation", '{"citation":{"start":0,"end":3}}')]
    assert parse_payload(notify_payload(turn_id, rows)) == (str(turn_id), rows)
    big = [(9, "message", orjson.dumps({"content": "é" * 4000}).decode())]  # 8000 bytes of UTF-8
    assert notify_payload(turn_id, big) == str(turn_id)
    assert parse_payload(str(turn_id)) == (str(turn_id), None)
    # Another's NOTIFY on the channel names no events: the tails read the log (the listener does not fail).
    for lines in ("x text {}", "1 text", "-1 text {}", "1", "1 text {}\nnot a row"):
        assert parse_payload(f"{turn_id}\n{lines}") == (str(turn_id), None)


def test_a_notification_reaches_the_feeds_that_follow_its_turn_with_the_events_it_carried():
    async def run() -> list[list[tuple[int, str, str]] | None]:
        feeds, key, other = TurnFeeds(None), uuid.uuid4(), uuid.uuid4()  # no listener: dispatched by hand
        first, second, elsewhere = feeds.follow(key), feeds.follow(key), feeds.follow(other)
        feeds.dispatch(notify_payload(key, [(2, "text", '{"text":"a"}'), (3, "citation", "{}")]))
        feeds.dispatch(str(key))  # a wake-up that names no events: read the log
        feeds.dispatch(f"{key}\nnot an event line")  # someone else's payload on the channel: read the log
        feeds.unfollow(key, second)
        feeds.dispatch(notify_payload(key, [(4, "text", "{}")]))
        got = [first.get_nowait() for _ in range(first.qsize())]
        assert (second.qsize(), elsewhere.qsize(), feeds.following()) == (3, 0, 2)
        return got

    assert asyncio.run(run()) == [[(2, "text", '{"text":"a"}'), (3, "citation", "{}")], None, None, [(4, "text", "{}")]]
