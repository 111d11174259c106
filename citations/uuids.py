"""Turn, session and log ids: the one UUID parser (docs/turns.md#the-record, docs/api.md).

An id has one spelling, the canonical 8-4-4-4-12 hex form (either case), in
a record, a URL, a query string, a posted form and the admin's search box.
"""

from __future__ import annotations

import re
import uuid

__all__ = ["parse_uuid"]

_CANONICAL_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def parse_uuid(value: object) -> uuid.UUID | None:
    """`value` as a UUID when it is a string in the canonical 8-4-4-4-12 hex
    form (either case), else None; never raises. Stricter than `uuid.UUID`,
    which also takes braces, `urn:uuid:` and undashed hex."""
    if isinstance(value, str) and _CANONICAL_UUID.fullmatch(value):
        return uuid.UUID(value)
    return None
