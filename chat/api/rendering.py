"""The session detail body, built without decoding the JSON columns (docs/api.md).

`ChatSessionDetailSerializer` defines the response (and the OpenAPI schema);
`session_detail_json` produces the same JSON for a whole session at a
fraction of the cost. A session can hold thousands of turns with dozens of
citations each, and running every citation through `json.loads` and DRF's
encoder made up most of a GET: the `citations` and `inline_citations`
columns are served exactly as stored anyway, so their stored JSON text
(`chat.selectors.session_message_rows`) is spliced into the body as it is.
Both databases hold only valid JSON in them (jsonb; Django's `JSON_VALID`
check on SQLite), so the body stays valid JSON with the same value a decoded
read gives; only its spelling may differ (spacing, `1e-07` vs `0.0000001`).

The other fields go through the serializer's own fields, so formats
(`created_at` with `Z`, ids with dashes) and time zone handling stay DRF's.
"""
from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Iterable
from itertools import chain
from typing import Any

import orjson
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer

from chat.api.serializers import ChatSessionDetailSerializer
from chat.models import ChatSession
from chat.selectors import session_message_rows

__all__ = ["EncodedJSON", "EncodedJSONRenderer", "session_detail_json"]

# Field types whose representation of a stored value is the value itself (or,
# for a UUID, what orjson writes for it), so orjson can take the value as is.
_VERBATIM_FIELDS = (serializers.CharField, serializers.ChoiceField)


class EncodedJSON:
    """A response body already encoded as JSON (UTF-8 bytes), for `EncodedJSONRenderer`."""

    __slots__ = ("body",)

    def __init__(self, body: bytes) -> None:
        self.body = body


class EncodedJSONRenderer(JSONRenderer):
    """DRF's `JSONRenderer`, passing an `EncodedJSON` body through untouched.

    Any other data (error bodies) renders as `JSONRenderer` does. A client
    asking for indented JSON (`Accept: application/json; indent=4`) gets the
    encoded body decoded and re-rendered with the indent, as before.
    """

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, EncodedJSON):
            if self.get_indent(accepted_media_type, renderer_context or {}) is None:
                return data.body
            data = json.loads(data.body)
        return super().render(data, accepted_media_type, renderer_context)


Converter = Callable[[Any], Any] | None


@functools.cache
def _message_plan() -> tuple[tuple[str, ...], tuple[Converter | serializers.Field, ...]]:
    """The message fields in serializer order and, for each, how to turn a row value into JSON.

    `None`: orjson writes the value as DRF would (strings, UUIDs).
    `orjson.Fragment`: a JSON column's text, spliced in. A serializer field:
    its `to_representation` (bound per request by `_converters`).
    """
    fields = ChatSessionDetailSerializer().fields["messages"].child.fields
    plan: list[Converter | serializers.Field] = []
    for field in fields.values():
        if isinstance(field, serializers.JSONField):
            plan.append(orjson.Fragment)
        elif isinstance(field, _VERBATIM_FIELDS) or (
            isinstance(field, serializers.UUIDField) and field.uuid_format == "hex_verbose"
        ):
            plan.append(None)
        else:
            plan.append(field)
    return tuple(fields), tuple(plan)


def _converters(plan: tuple[Converter | serializers.Field, ...]) -> tuple[Converter, ...]:
    """The plan with each field's `to_representation`, a date field's pinned to the current time zone.

    DRF looks the current time zone up on every call of a date field that has
    none of its own; it cannot change during one response, so a copy of the
    field holds it (the dates then cost under half as much).
    """
    converters: list[Converter] = []
    for step in plan:
        if isinstance(step, serializers.DateTimeField) and not hasattr(step, "timezone"):
            pinned = copy.copy(step)
            pinned.timezone = step.default_timezone()  # None with USE_TZ off, as DRF would use
            converters.append(pinned.to_representation)
        elif isinstance(step, serializers.Field):
            converters.append(step.to_representation)
        else:
            converters.append(step)
    return tuple(converters)


def _session_header(session: ChatSession) -> dict[str, Any]:
    """The session's own fields (all but `messages`), as the serializer represents them."""
    fields = ChatSessionDetailSerializer().fields
    header = {}
    for name, field in fields.items():
        if name != "messages":
            value = field.get_attribute(session)
            header[name] = None if value is None else field.to_representation(value)
    return header


_LINE_SEPARATORS = ("\u2028", "\u2029")


def _has_line_separator(values: Iterable[object]) -> bool:
    """Whether a string among `values` holds U+2028 or U+2029.

    Cheap on the usual values: an ASCII string is skipped on a flag, and a
    one-character search in a `str` runs in C. (Searching the encoded body
    for the two three-byte sequences costs about as much as encoding it.)
    """
    return any(
        type(value) is str and not value.isascii() and (_LINE_SEPARATORS[0] in value or _LINE_SEPARATORS[1] in value)
        for value in values
    )


def session_detail_json(*, session: ChatSession) -> EncodedJSON:
    """The body of `GET /api/chat/sessions/<id>/`: `ChatSessionDetailSerializer`'s JSON for `session`.

    Keys in serializer order, messages oldest first, `citations` and
    `inline_citations` as stored (jsonb key order on PostgreSQL). Like DRF's
    renderer it writes non-ASCII characters as UTF-8 but escapes U+2028 and
    U+2029, so the body is also a valid JavaScript literal. One query.
    """
    names, plan = _message_plan()
    converters = _converters(plan)
    rows = list(session_message_rows(session=session, fields=names))
    messages = [
        {
            name: value if convert is None or value is None else convert(value)
            for name, convert, value in zip(names, converters, row)
        }
        for row in rows
    ]
    header = _session_header(session)
    body = orjson.dumps({**header, "messages": messages})
    # orjson (like jsonb's text output) writes these two raw; DRF's renderer escapes them.
    if _has_line_separator(header.values()) or _has_line_separator(chain.from_iterable(rows)):
        body = body.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    return EncodedJSON(body)
