"""A row's citations summed up, for lists and filters (admin, docs/targets.md, docs/turns.md).

Staff filter `ai_chat_logs` by target kind and search by source or account id
on SQLite and PostgreSQL alike. JSON containment lookups do not run on SQLite,
so the service layer stores this summary in plain columns next to the JSON
(`chat.models.ChatLog`), computed here from the JSON alone.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from citations.targets import AccountsTarget, AccountTarget, CitationTarget, parse_citation_target

UNTYPED = "untyped"
MALFORMED = "malformed"
#: Separator of the delimited columns: never part of a kind or an account id
#: (ids are ASCII letters, digits, `-` and `_`, docs/accounts.md).
DELIMITER = "|"


@dataclass(frozen=True, slots=True)
class CitationSummary:
    """Counts and search keys of one row's citations.

    Counts are over `citations` (the turn's summary list): `typed` entries have
    a target `parse_citation_target` reads, `untyped` ones have no `target`
    key, `malformed` ones have a target it cannot read (null included), or are
    not objects at all (`classify_citation`). A column that is not a list counts as one malformed entry.

    `target_kinds` and `account_ids` cover both lists, as delimited strings
    (`"|account|untyped|"`) so that an exact member is found with a substring
    test; `sources` is the distinct sources, one per line.
    """

    citation_count: int
    typed_count: int
    untyped_count: int
    malformed_count: int
    target_kinds: str
    account_ids: str
    sources: str


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


def _account_ids(target: CitationTarget | None) -> tuple[str, ...]:
    if isinstance(target, AccountTarget):
        ids: tuple[str, ...] = (target.account_id,)
    elif isinstance(target, AccountsTarget):
        ids = tuple(ref.account_id for ref in target.accounts)
    else:
        return ()
    # An id holding the delimiter (or a line break) could match across
    # members; such a string is no account id of docs/accounts.md anyway.
    return tuple(i for i in ids if DELIMITER not in i and "\n" not in i)


_NOT_A_LIST = object()  # classified malformed: not an object


def _delimited(values: Iterable[str]) -> str:
    values = list(dict.fromkeys(values))
    return DELIMITER + DELIMITER.join(values) + DELIMITER if values else ""


def delimited_member(value: str) -> str:
    """The substring that finds `value` as a whole member of a delimited column."""
    return f"{DELIMITER}{value}{DELIMITER}"


def summarize_citations(citations: Any, inline_citations: Any) -> CitationSummary:
    """Summarise the two JSON columns of an `ai_chat_logs` row (any JSON values).

    Never raises: a column that is not a list is itself counted malformed.
    """
    counts = {UNTYPED: 0, MALFORMED: 0, "typed": 0}
    kinds: list[str] = []
    ids: list[str] = []
    sources: list[str] = []
    for column, counted in ((citations, True), (inline_citations, False)):
        # A column that is not a list (null, an object, a double-encoded
        # string) is one malformed entry, whatever it holds.
        for entry in column if isinstance(column, list) else [_NOT_A_LIST]:
            kind, target = classify_citation(entry)
            kinds.append(kind)
            ids.extend(_account_ids(target))
            if isinstance(entry, dict) and isinstance(entry.get("source"), str):
                sources.append(entry["source"])
            if counted:
                counts[kind if kind in (UNTYPED, MALFORMED) else "typed"] += 1
    return CitationSummary(
        citation_count=sum(counts.values()),
        typed_count=counts["typed"],
        untyped_count=counts[UNTYPED],
        malformed_count=counts[MALFORMED],
        target_kinds=_delimited(sorted(set(kinds))),
        account_ids=_delimited(ids),
        sources="\n".join(dict.fromkeys(sources)),
    )
