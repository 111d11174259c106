"""Text as clients slice it and as the databases store it (docs/turns.md#what-a-turn-stores).

- Offsets are UTF-16 code units, what JavaScript's `length` counts
  (`citations.utf16`).
- PostgreSQL stores neither a NUL character (text columns, jsonb) nor a lone
  UTF-16 surrogate (not Unicode at all; orjson and UTF-8 refuse it too). An
  import refuses a record holding one (`citations.turn`); a live turn, which
  cannot refuse what the model already said, replaces each with U+FFFD
  (`storable_text`, `storable_json`) and counts the replacements.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["REPLACEMENT", "storable_json", "storable_text", "text_problem"]

REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    """Why PostgreSQL cannot store `text` (a NUL, a lone surrogate), or None when it can."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000), which cannot be stored"
    if _UNSTORABLE.search(text):
        return "contains a lone UTF-16 surrogate, which is not valid Unicode text"
    return None


def storable_text(text: str) -> tuple[str, int]:
    """`text` with each NUL and lone surrogate replaced by U+FFFD, and how many were replaced.

    A Python `str` holds code points, so a surrogate in it is always a lone
    one (a valid pair decodes to one code point outside the BMP).
    """
    if not _UNSTORABLE.search(text):
        return text, 0
    return _UNSTORABLE.subn(REPLACEMENT, text)


def _storable_as_is(value: dict[Any, Any] | list[Any]) -> bool:
    """Whether `value` surely holds no NUL and no lone surrogate, asked of orjson at C speed: it refuses a lone
    surrogate and writes a NUL as `\\u0000`. False says nothing (a value orjson cannot write, a `\\u0000`
    spelled out in a string): `storable_json` then looks at every string."""
    try:
        return b"\\u0000" not in orjson.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return False


def storable_json(value: Any) -> tuple[Any, int]:
    """`value` (decoded JSON) with `storable_text` applied to every string, keys included.

    Returns the value (the same object when nothing changed) and the number
    of characters replaced. Iterative: no recursion limit on deep values.
    """
    replaced = 0

    def clean(item: Any) -> Any:
        nonlocal replaced
        if isinstance(item, str):
            text, n = storable_text(item)
            replaced += n
            return text
        return item

    if isinstance(value, str):
        return clean(value), replaced
    if not isinstance(value, dict | list):
        return value, 0
    if _storable_as_is(value):
        return value, 0
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, dict | list):
                child: Any = {} if isinstance(item, dict) else []
                stack.append((item, child))
            else:
                child = clean(item)
            if isinstance(target, dict):
                target[clean(key)] = child
            else:
                target.append(child)
    return (root, replaced) if replaced else (value, 0)
