"""The session detail body, written as it is read, without decoding the JSON columns (docs/api.md).

`ChatSessionDetailSerializer` defines the response (and the OpenAPI schema).
This module produces the same bytes at a fraction of the cost, from an
explicit column list (`SESSION_COLUMNS`, `MESSAGE_COLUMNS`) that
`tests/chat/test_api_rendering.py` ties to the serializers: a field added to one
without the other fails a test, not a request.

- `citations` and `inline_citations` are served exactly as stored, so their
  stored JSON text (`chat.selectors.session_message_rows`) is spliced into
  the body as it is. Both databases hold only valid JSON in them (jsonb;
  Django's `JSON_VALID` check on SQLite), so the body is valid JSON with the
  value a decoded read gives; only its spelling may differ from DRF's
  (spacing, `1e-07` vs `0.0000001`).
- Dates go through the serializer's own `DateTimeField`, so their format and
  time zone stay DRF's; ids and strings are written by orjson as DRF would.
- The body is produced in chunks of rows (`session_detail_chunks`), from a
  server-side cursor on PostgreSQL, so a process's memory does not grow with
  the session's size.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import hashlib
import json
import uuid
from collections.abc import Callable, Generator, Iterable, Iterator
from itertools import islice
from typing import Any

import orjson
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import timezone
from rest_framework import ISO_8601, serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.serializers import Serializer
from rest_framework.settings import api_settings

from chat.api.serializers import ChatLogSerializer, ChatSessionDetailSerializer, ChatSessionListSerializer
from chat.models import ChatSession
from chat.selectors import MessageCursor, SessionDetail, session_message_rows, session_message_rows_fetched

__all__ = [
    "LIST_COLUMNS",
    "MESSAGE_COLUMNS",
    "SESSION_COLUMNS",
    "EncodedJSON",
    "EncodedJSONRenderer",
    "session_detail_chunks",
    "session_detail_etag",
    "session_detail_json",
    "session_list_json",
]

#: How a column's value becomes JSON: as is (orjson writes strings and UUIDs
#: as DRF does), as stored JSON text spliced in, or through the serializer's
#: `DateTimeField`.
VERBATIM, JSON_TEXT, DATETIME = "verbatim", "json_text", "datetime"

#: The session's own fields, in `ChatSessionDetailSerializer` order (then `messages`).
SESSION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", VERBATIM),
    ("title", VERBATIM),
    ("created_at", DATETIME),
    ("updated_at", DATETIME),
)

#: One message's fields: the `ai_chat_logs` columns read, in `ChatLogSerializer` order.
MESSAGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", VERBATIM),
    ("user_message", VERBATIM),
    ("response", VERBATIM),
    ("citations", JSON_TEXT),
    ("inline_citations", JSON_TEXT),
    ("prompt_version", VERBATIM),
    ("model", VERBATIM),
    ("created_at", DATETIME),
)

#: One entry of the sessions list, in `ChatSessionListSerializer` order (`message_count` is annotated).
LIST_COLUMNS: tuple[tuple[str, str], ...] = (*SESSION_COLUMNS, ("message_count", VERBATIM))

#: Rows per chunk of the body: about 2 MB of body for turns of 20 citations.
CHUNK_ROWS = 250


class EncodedJSON:
    """A response body already encoded as JSON (UTF-8 bytes), for `EncodedJSONRenderer`."""

    __slots__ = ("body",)

    def __init__(self, body: bytes) -> None:
        self.body = body


class EncodedJSONRenderer(JSONRenderer):
    """DRF's `JSONRenderer`, passing an `EncodedJSON` body through untouched.

    Any other data (error bodies) renders as `JSONRenderer` does. A client
    asking for indented JSON (`Accept: application/json; indent=4`) gets the
    encoded body decoded and re-rendered with the indent.
    """

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, EncodedJSON):
            if self.get_indent(accepted_media_type or "", renderer_context or {}) is None:
                return data.body
            data = json.loads(data.body)
        return super().render(data, accepted_media_type, renderer_context)


Converter = Callable[[Any], Any] | None


@functools.cache
def serializer_fields(serializer: type[Serializer[Any]]) -> Any:
    """`serializer().fields`, built once per class (a model serializer introspects its model on every
    instantiation); rebuilt after a settings change (DRF's field formats come from settings)."""
    return serializer().fields


@receiver(setting_changed)
def _forget_fields(**kwargs: Any) -> None:
    serializer_fields.cache_clear()
    _converters_in.cache_clear()


def _converters(columns: tuple[tuple[str, str], ...], serializer: type[Serializer[Any]]) -> tuple[Converter, ...]:
    """Per column: None (as is), `orjson.Fragment`, or `datetime_converter` of `serializer`'s field.

    A date field gets a copy pinned to the current time zone: DRF looks it up
    on every call otherwise, and it cannot change during one response. Built
    once per (columns, serializer, time zone): every list and detail answer
    needs them (bench/README.md, "empty list").
    """
    zone = timezone.get_current_timezone() if settings.USE_TZ else None
    return _converters_in(columns, serializer, zone)


@functools.lru_cache(maxsize=64)
def _converters_in(
    columns: tuple[tuple[str, str], ...], serializer: type[Serializer[Any]], zone: Any
) -> tuple[Converter, ...]:
    fields = serializer_fields(serializer)
    converters: list[Converter] = []
    for name, kind in columns:
        if kind == VERBATIM:
            converters.append(None)
        elif kind == JSON_TEXT:
            converters.append(orjson.Fragment)
        else:
            field = fields[name]
            if not hasattr(field, "timezone"):
                field = copy.copy(field)
                field.timezone = zone  # `field.default_timezone()`: None with USE_TZ off, as DRF would use
            converters.append(datetime_converter(field))
    return tuple(converters)


#: Time zones with no offset ever, by their IANA names.
_UTC_KEYS = frozenset({"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu"})


def datetime_converter(field: serializers.DateTimeField) -> Callable[[Any], Any]:
    """What `_encode` turns into the text `field.to_representation(value)` gives, for a `DateTimeField`
    whose `timezone` is set.

    With DRF's ISO 8601 output and a time zone, an aware datetime is moved to
    that zone and left to orjson (`OPT_UTC_Z`), which writes it as DRF does
    (`isoformat()`, `+00:00` as `Z`) at a fraction of the cost; an offset
    orjson would round (seconds: old local mean times), a naive value or any
    other format goes through the field itself. `tests/chat/test_api_rendering.py`
    checks the two agree for any datetime and time zone.
    """
    represent = field.to_representation
    zone = field.timezone
    if zone is None or str(getattr(field, "format", api_settings.DATETIME_FORMAT)).lower() != ISO_8601:
        return represent
    # In UTC, a value PostgreSQL gave (in `dt.UTC`) is already what orjson must write.
    utc = zone is dt.UTC or getattr(zone, "key", None) in _UTC_KEYS

    def convert(value: Any) -> Any:
        if utc and type(value) is dt.datetime and value.tzinfo is dt.UTC:
            return value
        if type(value) is dt.datetime and value.tzinfo is not None:
            try:
                local = value.astimezone(zone)
            except OverflowError:
                return represent(value)  # DRF's own "overflow" error
            offset = local.utcoffset()
            if offset is not None and not offset.seconds % 60 and not offset.microseconds:
                return local
        return represent(value)

    return convert


def _objects(
    columns: tuple[tuple[str, str], ...], serializer: type[Serializer[Any]], rows: list[tuple[Any, ...]]
) -> list[dict[str, Any]]:
    """`rows` (tuples of the `columns` values) as dicts in column order, each value converted (`_converters`).

    Each dict is made by `dict(zip(...))` and only the columns with a
    converter are then replaced (keeping their place): the per-row work in
    Python is those few columns, not every column.
    """
    names = tuple(name for name, _ in columns)
    converted = tuple(
        (index, name, convert)
        for index, (name, convert) in enumerate(zip(names, _converters(columns, serializer), strict=True))
        if convert is not None
    )
    objects = []
    for row in rows:
        obj = dict(zip(names, row, strict=True))
        for index, name, convert in converted:
            value = row[index]
            if value is not None:
                obj[name] = convert(value)
        objects.append(obj)
    return objects


_LINE_SEPARATOR, _PARAGRAPH_SEPARATOR = "\u2028".encode(), "\u2029".encode()


def _encode(values: Any) -> bytes:
    """`values` as JSON bytes, U+2028 and U+2029 escaped as DRF's renderer writes them.

    orjson (like jsonb's text output) writes the two raw; DRF escapes them so
    the body is also a valid JavaScript literal. Looked for in the encoded
    bytes rather than in each value.
    """
    body = orjson.dumps(values, option=orjson.OPT_UTC_Z)
    # Their last bytes (0xA8, 0xA9) are rare in UTF-8 text, and a one-byte
    # search is a memchr: the three-byte search runs only when one is there.
    if (b"\xa8" in body or b"\xa9" in body) and (_LINE_SEPARATOR in body or _PARAGRAPH_SEPARATOR in body):
        body = body.replace(_LINE_SEPARATOR, b"\\u2028").replace(_PARAGRAPH_SEPARATOR, b"\\u2029")
    return body


def session_detail_chunks(
    *, session: ChatSession, after: MessageCursor | None = None, chunk_rows: int = CHUNK_ROWS, server_side: bool = True
) -> Generator[bytes, None, None]:
    """The body of `GET /api/chat/sessions/<id>/` in pieces: `ChatSessionDetailSerializer`'s JSON for `session`.

    Keys in serializer order; messages oldest first (only those after `after`
    when given); `citations`/`inline_citations` as stored (jsonb key order on
    PostgreSQL). Non-ASCII characters are UTF-8, U+2028/U+2029 escaped, as
    DRF's renderer writes them. Joined, the pieces are the same bytes however
    many rows a piece holds. One query, read `chunk_rows` rows at a time:
    from a server-side cursor on PostgreSQL when `server_side` (iterate it
    inside a transaction, or the server materialises the rows first);
    otherwise fetched whole, which saves the cursor's round trips on a
    session known to be small.
    """
    header_values = tuple(getattr(session, name) for name, _ in SESSION_COLUMNS)
    [header] = _objects(SESSION_COLUMNS, ChatSessionDetailSerializer, [header_values])
    # `{...header...}` without its closing brace, then the messages list.
    yield _encode(header)[:-1] + b',"messages":['
    names = tuple(name for name, _ in MESSAGE_COLUMNS)
    rows: Iterator[tuple[Any, ...]] = (
        session_message_rows(session=session, fields=names, after=after).iterator(chunk_size=chunk_rows)
        if server_side
        else iter(session_message_rows_fetched(session=session, fields=names, after=after))
    )
    first = True
    while chunk := list(islice(rows, chunk_rows)):
        encoded = _encode(_objects(MESSAGE_COLUMNS, ChatLogSerializer, chunk))[1:-1]
        yield encoded if first else b"," + encoded
        first = False
    yield b"]}"


def session_list_json(
    *, count: int, next_link: str | None, previous_link: str | None, rows: Iterable[tuple[Any, ...]]
) -> EncodedJSON:
    """The body of `GET /api/chat/sessions/`: DRF's page-number envelope around `ChatSessionListSerializer` entries.

    `rows` are tuples of the `LIST_COLUMNS` values (the page, as
    `chat.api.pagination.SessionPaginator` reads it); dates go through the
    serializer's own `DateTimeField`, as in the detail.
    """
    results = _objects(LIST_COLUMNS, ChatSessionListSerializer, list(rows))
    body = {"count": count, "next": next_link, "previous": previous_link, "results": results}
    return EncodedJSON(_encode(body))


def session_detail_json(*, session: ChatSession, after: MessageCursor | None = None) -> EncodedJSON:
    """The whole body of `session_detail_chunks` at once (for small sessions and indented output)."""
    return EncodedJSON(b"".join(session_detail_chunks(session=session, after=after, server_side=False)))


def session_detail_etag(*, detail: SessionDetail, after: uuid.UUID | None = None) -> str:
    """The detail's strong `ETag` (a quoted hex string) for a `session_detail_for_user` result and `?after=`.

    It changes when the session gains or loses a turn (`message_count`,
    `last_message_at`), when its own fields change, with `?after=` and with
    the current time zone (dates are written in it). Rows rewritten in place
    (the backfill) keep it: change the setting `API_ETAG_SALT` after a
    backfill to make every client fetch again.
    """
    session = detail.session
    parts = (
        session.pk,
        session.title,
        session.created_at.isoformat(),
        session.updated_at.isoformat(),
        detail.message_count,
        detail.last_message_at,
        after,
        timezone.get_current_timezone_name(),
        getattr(settings, "API_ETAG_SALT", ""),
    )
    return '"' + hashlib.sha256(repr(parts).encode()).hexdigest()[:32] + '"'
