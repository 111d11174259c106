"""The state of one stored citation: typed (its kind), untyped or malformed.

See docs/targets.md, docs/turns.md and docs/backfill.md.

The admin's counts and kind filter mean exactly this; the database computes
them from the JSON (`chat.citation_queries`), and tests compare that SQL against
`classify_citation` over random rows.
"""

from __future__ import annotations

from typing import Any

from citations.targets import CitationTarget, parse_citation_target

UNTYPED = "untyped"
MALFORMED = "malformed"


def classify_citation(entry: Any) -> tuple[str, CitationTarget | None]:
    """`(kind, target)` of one stored citation (docs/targets.md, docs/turns.md, docs/backfill.md).

    `kind` is the target's kind when `parse_citation_target` reads it, with
    the target; `UNTYPED` when the entry has no `target` key (docs/turns.md: an
    untyped citation has none); `MALFORMED` when the entry is not an object
    or its `target` cannot be read, `null` included: a target key the
    backfill never fills (docs/backfill.md), so it is no plain untyped citation.
    """
    if not isinstance(entry, dict):
        return MALFORMED, None
    if "target" not in entry:
        return UNTYPED, None
    target = parse_citation_target(entry["target"])
    if target is None:
        return MALFORMED, None
    return target.kind, target
