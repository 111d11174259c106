"""OpenAPI descriptions of the JSON columns (docs/targets.md, docs/turns.md, docs/api.md).

The columns are served raw, so the schema documents what the service writes:
a citation, optionally with a `target` from the union below. Clients must
still read a target through a parser that tolerates unknown kinds.
"""

from __future__ import annotations

from typing import Any

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

INLINE_CITATIONS = {
    "type": "array",
    "description": (
        "One entry per citation the model made, exactly as stored. start/end are UTF-16 code unit offsets "
        "into `response` (end exclusive)."
    ),
    "items": {
        "type": "object",
        "required": ["source", "title", "cited_text", "start", "end"],
        "properties": {
            **_CITATION_PROPERTIES,
            "start": {"type": "integer", "minimum": 0},
            "end": {"type": "integer", "minimum": 0},
        },
    },
}
