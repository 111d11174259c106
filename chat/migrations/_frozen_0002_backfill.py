"""FROZEN: the code migration `0002_backfill_citation_targets` runs. Never edit.

A migration is history: it must do on a fresh database in a year what it did
on the day it shipped, whatever `chat` and `citations` have become by then
(Django's advice on data migrations). So this module imports nothing from
the project, only the standard library and `django.db`, and writes only the
columns `ai_chat_logs` has at 0002: the two JSON lists and the summary
columns of 0001 (`citation_count`, ..., `sources`). The live code that does
the same job for big tables is `chat.backfill` (docs/backfill.md). A test
migrates 0001 -> 0002 for real over rows written with the 0001 models.

The rule (docs/backfill.md): a citation without a `target` key gets the
target its `source` alone determines; nothing else changes, `"target"` is
appended last, and a row whose column is not a list of objects is left whole.

Batches of `BATCH_SIZE` rows in primary-key order, each in its own
transaction: its rows are read `FOR UPDATE` on PostgreSQL, worked out, and
the rows that change are written back with one `UPDATE ... FROM (VALUES ...)`. A deploy that dies
half-way keeps the committed batches; running again finishes the job.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.db import transaction

BATCH_SIZE = 1000

_TICKER = re.compile(r"[A-Z][A-Z0-9.-]{0,9}")
_EXACT = {
    "silvia://your-portfolio": {"kind": "portfolio"},
    "silvia://market-data/finnhub": {"kind": "analysis"},
    "silvia://analysis": {"kind": "analysis"},
}
_PREFIXES = (
    ("silvia://tax-authority/", "tax_reference"),
    ("silvia://credit-card-corpus/", "card_document"),
    ("silvia://mortgage-code/", "mortgage_reference"),
)
_TICKER_PREFIX = "silvia://market-data/finnhub/"


def target_json(source: Any) -> dict[str, Any] | None:
    """The target JSON a `source` alone determines, or `None` (the table of docs/backfill.md)."""
    if not isinstance(source, str):
        return None
    if source in _EXACT:
        return dict(_EXACT[source])
    if source.startswith(_TICKER_PREFIX):
        ticker = source[len(_TICKER_PREFIX) :]
        ticker = ticker.upper() if ticker.isascii() else ""
        return {"kind": "market_data", "ticker": ticker} if _TICKER.fullmatch(ticker) else None
    kind = next((k for prefix, k in _PREFIXES if source.startswith(prefix) and source != prefix), None)
    return None if kind is None else {"kind": kind, "url": None}


def backfill_list(value: Any) -> tuple[list[Any], int] | None:
    """`(new list, targets added)` for one stored list; `None` when it is not a list of objects."""
    if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
        return None
    added = 0
    out = []
    for entry in value:
        target = None if "target" in entry else target_json(entry.get("source"))
        if target is not None:
            entry = {**entry, "target": target}
            added += 1
        out.append(entry)
    return out, added


# --- the summary columns of 0001, as `citations.summary` computed them then ---


def _nonempty_str(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _account_ids(target: dict[str, Any]) -> list[str] | None:
    """The ids of a valid `account`/`accounts` target, `[]` for another kind, `None` if malformed."""
    refs = [target] if target.get("kind") == "account" else target.get("accounts")
    if not isinstance(refs, list) or not refs:
        return None
    if not all(isinstance(ref, dict) and _nonempty_str(ref.get("accountId")) for ref in refs):
        return None
    return [ref["accountId"] for ref in refs]


def _classify(entry: Any) -> tuple[str, list[str]]:
    """(kind, account ids) of one entry: `untyped` without a target key, `malformed` when unreadable."""
    if not isinstance(entry, dict):
        return "malformed", []
    if "target" not in entry:
        return "untyped", []
    target = entry["target"]
    kind = target.get("kind") if isinstance(target, dict) else None
    if kind in ("analysis", "portfolio"):
        return kind, []
    if kind in ("web", "market_data"):
        field = "url" if kind == "web" else "ticker"
        return (kind, []) if _nonempty_str(target.get(field)) else ("malformed", [])
    if kind in ("tax_reference", "card_document", "mortgage_reference"):
        ok = "url" in target and (target["url"] is None or _nonempty_str(target["url"]))
        return (kind, []) if ok else ("malformed", [])
    if kind in ("account", "accounts"):
        ids = _account_ids(target)
        return ("malformed", []) if ids is None else (kind, ids)
    return "malformed", []


def summary(citations: list[Any], inline_citations: list[Any]) -> dict[str, Any]:
    """The 0001 summary columns of two lists: counts over `citations`, keys over both."""
    counts = {"typed": 0, "untyped": 0, "malformed": 0}
    kinds: set[str] = set()
    ids: list[str] = []
    sources: list[str] = []
    for entries, counted in ((citations, True), (inline_citations, False)):
        for entry in entries:
            kind, entry_ids = _classify(entry)
            kinds.add(kind)
            ids.extend(i for i in entry_ids if "|" not in i and "\n" not in i)
            if isinstance(entry.get("source"), str):
                sources.append(entry["source"])
            if counted:
                counts[kind if kind in ("untyped", "malformed") else "typed"] += 1

    def delimited(values: list[str]) -> str:
        return "|" + "|".join(values) + "|" if values else ""

    return {
        "citation_count": sum(counts.values()),
        "typed_count": counts["typed"],
        "untyped_count": counts["untyped"],
        "malformed_count": counts["malformed"],
        "target_kinds": delimited(sorted(kinds)),
        "account_ids": delimited(list(dict.fromkeys(ids))),
        "sources": "\n".join(dict.fromkeys(sources)),
    }


# --- the batches ---------------------------------------------------------------

_SUMMARY_COLUMNS = (
    "citation_count",
    "typed_count",
    "untyped_count",
    "malformed_count",
    "target_kinds",
    "account_ids",
    "sources",
)


def _decode(raw: Any) -> Any:
    if not isinstance(raw, (str, bytes)):
        return raw  # SQL NULL, or a driver that decoded it already
    try:
        return json.loads(raw)
    except ValueError:
        return None  # not JSON: left alone, like any malformed row


def backfill_0002(model: Any, using: str) -> tuple[int, int]:
    """Type every row of `model`'s table (the historical `ChatLog`); returns `(rows scanned, rows changed)`."""
    from django.db import connections

    connection = connections[using]
    qn = connection.ops.quote_name
    table, pk = qn(model._meta.db_table), qn(model._meta.pk.column)
    postgresql = connection.vendor == "postgresql"
    # One VALUES row per changed row; PostgreSQL needs the types spelled out.
    casts = ("::uuid", "::jsonb", "::jsonb", *["::integer"] * 4, "", "", "") if postgresql else ("",) * 10
    written = ("id", "citations", "inline_citations", *_SUMMARY_COLUMNS)
    value_row = "(" + ", ".join(f"%s{cast}" for cast in casts) + ")"
    assignments = ", ".join(f"{qn(column)} = v.{qn(column)}" for column in written[1:])
    scanned = changed = 0
    last: Any = None
    while True:
        with transaction.atomic(using=using), connection.cursor() as cursor:
            params: list[Any] = [] if last is None else [last]
            where = "" if last is None else f" WHERE {pk} > %s"
            lock = " FOR UPDATE" if postgresql else ""
            select = f"SELECT {pk}, {qn('citations')}, {qn('inline_citations')} FROM {table}{where}"
            cursor.execute(f"{select} ORDER BY {pk} LIMIT %s{lock}", [*params, BATCH_SIZE])
            rows = cursor.fetchall()
            writes: list[Any] = []
            for row_id, raw_citations, raw_inline in rows:
                citations = backfill_list(_decode(raw_citations))
                inline = backfill_list(_decode(raw_inline))
                if citations is None or inline is None or citations[1] + inline[1] == 0:
                    continue
                columns = summary(citations[0], inline[0])
                json_values = [json.dumps(citations[0]), json.dumps(inline[0])]
                writes.append([row_id, *json_values, *(columns[name] for name in _SUMMARY_COLUMNS)])
            if writes:
                # One statement for the batch. Names are quoted by the
                # connection; every value is a bound parameter.
                values = ", ".join([value_row] * len(writes))
                with_v = f"WITH v({', '.join(qn(c) for c in written)}) AS (VALUES {values})"
                update = f"UPDATE {table} SET {assignments} FROM v WHERE {table}.{pk} = v.{qn('id')}"
                cursor.execute(f"{with_v} {update}", [value for write in writes for value in write])
        scanned += len(rows)
        changed += len(writes)
        if len(rows) < BATCH_SIZE:
            return scanned, changed
        last = rows[-1][0]
