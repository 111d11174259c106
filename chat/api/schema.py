"""OpenAPI descriptions of the JSON columns and of the live event stream (docs/targets.md, turns.md, api.md, live.md).

The columns are served raw, so the schema documents what the service writes:
a citation, optionally with a `target` from the union below. Clients must
still read a target through a parser that tolerates unknown kinds.
"""

from __future__ import annotations

from typing import Any

from citations.live_events import EventName

_STRING = {"type": "string"}
_URL = {"type": "string", "format": "uri"}
_NULLABLE_URL = {"type": "string", "format": "uri", "nullable": True}
_PROVIDER = {
    "type": "string",
    "enum": ["plaid", "manual", "snaptrade"],
    "nullable": True,
    "description": "For routing only; never shown to end users. Null when the rows did not say.",
}
ACCOUNT_REF: dict[str, Any] = {
    "type": "object",
    "required": ["accountId", "provider"],
    "properties": {"accountId": {"type": "string", "minLength": 16, "maxLength": 128}, "provider": _PROVIDER},
}


def _kind(kind: str, description: str, **properties: dict) -> dict:
    return {
        "type": "object",
        "title": kind,
        "description": description,
        "required": ["kind", *properties],
        "properties": {"kind": {"type": "string", "enum": [kind]}, **properties},
    }


CITATION_TARGET = {
    "description": (
        "What a citation points at (docs/targets.md). Read it through a parser that returns null for an "
        "unknown kind or a malformed value and fall back to `source`/`title` then."
    ),
    "oneOf": [
        _kind("web", "A web page.", url=_URL),
        _kind(
            "tax_reference", "A tax authority document; url null when only the corpus path is known.", url=_NULLABLE_URL
        ),
        _kind("card_document", "A credit card issuer document.", url=_NULLABLE_URL),
        _kind("mortgage_reference", "A mortgage regulation or agency page.", url=_NULLABLE_URL),
        _kind("market_data", "Live market data for one ticker.", ticker={"type": "string"}),
        _kind("analysis", "A computation or a payload without a ticker."),
        {
            **_kind("account", "One of the user's accounts, by its real id."),
            "required": ["kind", "accountId", "provider"],
            "properties": {"kind": {"type": "string", "enum": ["account"]}, **ACCOUNT_REF["properties"]},
        },
        _kind(
            "accounts",
            "Several accounts behind one label.",
            accounts={"type": "array", "minItems": 1, "items": ACCOUNT_REF},
        ),
        _kind("portfolio", "The user's whole portfolio."),
    ],
    "discriminator": {"propertyName": "kind"},
}

_CITATION_PROPERTIES = {
    "source": {"type": "string"},
    "title": {"type": "string", "nullable": True},
    "cited_text": {"type": "string"},
    "target": CITATION_TARGET,
}

CITATIONS = {
    "type": "array",
    "description": "The turn's citations, one per distinct (source, cited_text), exactly as stored.",
    "items": {"type": "object", "required": ["source", "title", "cited_text"], "properties": _CITATION_PROPERTIES},
}

_INLINE_CITATION: dict[str, Any] = {
    "type": "object",
    "required": ["source", "title", "cited_text", "start", "end"],
    "properties": {
        **_CITATION_PROPERTIES,
        "start": {"type": "integer", "minimum": 0},
        "end": {"type": "integer", "minimum": 0},
    },
}

INLINE_CITATIONS = {
    "type": "array",
    "description": (
        "One entry per citation the model made, exactly as stored. start/end are UTF-16 code unit offsets "
        "into `response` (end exclusive)."
    ),
    "items": _INLINE_CITATION,
}


# --- the live turn's event stream (docs/live.md) -----------------------------

_UUID = {"type": "string", "format": "uuid"}


def _object(description: str, **properties: dict) -> dict:
    return {"type": "object", "description": description, "required": list(properties), "properties": properties}


EVENT_DATA: dict[EventName, dict[str, Any]] = {
    EventName.TURN: _object("First, so a client can reconnect.", turn_id=_UUID, session_id=_UUID),
    EventName.TEXT: _object("A piece of the answer; joined, the text events are the stored response.", text=_STRING),
    EventName.CITATION: _object(
        "One inline citation, once complete (its text block ended).", citation=_INLINE_CITATION
    ),
    EventName.CITATIONS_SUMMARY: _object("The turn's stored citations.", citations=CITATIONS),
    EventName.MESSAGE: {
        "type": "object",
        "description": "The raw final Anthropic message (a Messages API response object) of the last model step.",
    },
    EventName.DONE: _object(
        "The turn is stored.",
        log_id=_UUID,
        session_id=_UUID,
        skipped_citations={
            "type": "object",
            "description": "Citations of types that are not stored, counted by type.",
            "additionalProperties": {"type": "integer", "minimum": 1},
        },
        stop_reason={"type": "string", "description": "The last model step's stop_reason (end_turn, max_tokens, ...)."},
    ),
    EventName.ERROR: _object(
        "The turn failed; nothing was stored.",
        error=_object(
            "What went wrong.", type=_STRING, message={"type": "string", "description": "Fit to show a user."}
        ),
    ),
    EventName.REWIND: _object(
        "Drop every event received after id `to`, then go on; `answer` is the answer as it stood at `to`.",
        to={"type": "integer", "minimum": 1},
        answer=_STRING,
    ),
}

EVENT_STREAM = {
    "type": "object",
    "description": (
        "`text/event-stream`: a `retry:` line once, then one SSE frame per event: `id: <n>` (1, 2, ... within the "
        "turn, never reused), `event: <name>`, `data: <JSON on one line>` (U+2028, U+2029 and U+0085 escaped). "
        "Each frame, read as `{id, event, data}`, is one of these. Order: `turn`, then `text` and `citation` "
        "as they happen (a `rewind` may come between), then `citations_summary`, `message`, `done`; or `error` "
        "at any point after `turn`. See docs/live.md."
    ),
    "oneOf": [
        {
            "type": "object",
            "title": name.value,
            "required": ["id", "event", "data"],
            "properties": {
                "id": {"type": "integer", "minimum": 1},
                "event": {"type": "string", "enum": [name.value]},
                "data": data,
            },
        }
        for name, data in EVENT_DATA.items()
    ],
    "discriminator": {"propertyName": "event"},
}

EVENT_ID = {"type": "integer", "minimum": 0}


def document_401(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: what every operation may answer (docs/api.md#errors): 401 without
    credentials, 503 when the database does not answer, 413 for a body too large (the ones that take a body)."""
    unauthorized = {
        "description": 'No credentials, or wrong ones: `{"detail": ...}` with `WWW-Authenticate: Token`.',
        "headers": {"WWW-Authenticate": {"schema": {"type": "string", "enum": ["Token"]}}},
        "content": {
            "application/json": {
                "schema": {"type": "object", "required": ["detail"], "properties": {"detail": _STRING}}
            }
        },
    }
    detail = {
        "application/json": {"schema": {"type": "object", "required": ["detail"], "properties": {"detail": _STRING}}}
    }
    busy = {
        "description": "The database did not answer in time (down, or its pool busy): retry after `Retry-After`.",
        "headers": {"Retry-After": {"schema": {"type": "integer"}}},
        "content": detail,
    }
    control = {
        "description": "A control character in the path, the query string, a header or a cookie "
        '(silvia/middleware.py): `{"detail"}` naming where.',
        "content": detail,
    }
    too_large = {"description": "The request body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE.", "content": detail}
    for path in result.get("paths", {}).values():
        for method, operation in path.items():
            if isinstance(operation, dict) and "responses" in operation:
                operation["responses"].setdefault("401", unauthorized)
                operation["responses"].setdefault("503", busy)  # every view reads the database
                operation["responses"].setdefault("400", control)
                if method in ("post", "put", "patch"):
                    operation["responses"].setdefault("413", too_large)
    return result
