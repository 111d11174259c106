"""Logging filters that keep user data out of every log handler (docs/privacy.md).

`PrivacyFilter` sits on every handler of `settings.LOGGING`, so it sees records
of every logger, ours, Django's, uvicorn's and any library's, at every level.
A filter on a logger would miss records propagated from its children.
"""

from __future__ import annotations

import logging
import re
import traceback
from types import TracebackType

# Records of `django.db.backends` (and `.schema`) carry the statement in
# `sql` and its values in `params`. The SQL text itself holds the values too
# (SQLite's and psycopg's client-side binding inline them), so neither is kept.
_STATEMENT = re.compile(
    r"^\s*(?:\d+ times: )?"
    r'(?:(INSERT INTO|UPDATE|DELETE FROM)\s+"?(\w+)"?(?=[\s(;]|$)|(SELECT)\s+(?:DISTINCT\s+)?"(\w+)"\.|(\w+))',
    re.IGNORECASE,
)
#: Loggers of HTTP clients whose DEBUG lines carry request bodies (the anthropic SDK's).
_HTTP_CLIENT_LOGGERS = frozenset({"anthropic", "httpx", "httpcore"})
_URLISH = re.compile(r"^(?:[A-Z]+ )?/")
_QUERY = re.compile(r"\?[^\s\"]*")
# `/accounts/<segment>`: the pages put an account id in the path (docs/privacy.md and docs/pages.md).
_ACCOUNT_SEGMENT = re.compile(r"/accounts/[^/\s?\"]+")
_ACCESS_LOGGERS = ("uvicorn.access", "django.server")
_PROBES = ("/healthz", "/readyz")


class PrivacyFilter(logging.Filter):
    """Rewrite a record so that no account id, target or citation JSON can reach a handler.

    - SQL debug records: the message becomes `(seconds) VERB "table"; alias=…`;
      `sql` and `params` keep only that too.
    - Any string argument that is a path or request line (`/a?b`, `GET /a?b HTTP/1.1`):
      the query string becomes `?…` and `/accounts/<id>` becomes `/accounts/…`.
    - A traceback whose exception chain holds a database error keeps its frames,
      but every message of the chain is withheld: `IntegrityError` and
      `DataError` quote row values.
    Always returns True (it redacts, never drops).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        sql = getattr(record, "sql", None)
        if isinstance(sql, str):
            _redact_sql_record(record, sql)
        elif isinstance(record.args, tuple) and record.args:
            record.args = tuple(redact_url(a) if isinstance(a, str) else a for a in record.args)
        if record.exc_info and record.exc_info[1] is not None and _holds_database_error(record.exc_info[1]):
            record.exc_text = _withheld_traceback(record.exc_info[1])
            record.exc_info = None
        if record.levelno < logging.INFO and record.name.partition(".")[0] in _HTTP_CLIENT_LOGGERS:
            # The SDK's and httpx's debug lines print whole requests: the user's
            # message and the tool results, account ids and balances included.
            return False
        if record.name.startswith("psycopg"):
            # The driver's own lines (the connection pool's) quote the server's
            # error, which can quote row values: keep what it was doing only.
            record.msg = record.getMessage().split(":", 1)[0]
            record.args = ()
        return True


class QuietHealthCheck(logging.Filter):
    """Drop access-log lines of a healthy `/healthz` or `/readyz` probe (status below 400); keep failures."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name not in _ACCESS_LOGGERS or not isinstance(record.args, tuple):
            return True
        strings = [a for a in record.args if isinstance(a, str)]
        status = next((a for a in record.args[1:] if isinstance(a, int) or (isinstance(a, str) and a.isdigit())), None)
        is_probe = any(s in _PROBES or s.startswith(tuple(f"GET {p} " for p in _PROBES)) for s in strings)
        return not (is_probe and status is not None and int(status) < 400)


def redact_url(text: str) -> str:
    """`GET /a?q=secret HTTP/1.1` -> `GET /a?… HTTP/1.1`; `/accounts/<id>/x` -> `/accounts/…/x`.

    Only a string that starts with a path (optionally after an HTTP method) is
    touched; any other string is returned unchanged.
    """
    if not _URLISH.match(text):
        return text
    return _ACCOUNT_SEGMENT.sub("/accounts/…", _QUERY.sub("?…", text))


def redact_request_line(line: str) -> str:
    """`GET /a?q=secret HTTP/1.1` -> `GET /a?… HTTP/1.1` (see `redact_url`)."""
    return redact_url(line)


def statement_summary(sql: str) -> str:
    """`INSERT INTO "ai_chat_logs" (…) VALUES (…)` -> `INSERT INTO "ai_chat_logs"`; no value survives.

    Keeps the verb, and the table when it stands where only an identifier can
    (right after the verb, or qualifying the first selected column); else `SQL`.
    """
    match = _STATEMENT.match(sql)
    if match is None:
        return "SQL"
    verb, table, select, select_table, word = match.groups()
    if verb:
        return f'{verb.upper()} "{table}"'
    if select:
        return f'SELECT "{select_table}"'
    return word.upper()


def _redact_sql_record(record: logging.LogRecord, sql: str) -> None:
    # `sql` and `params` are set by Django's `extra=`.
    summary = statement_summary(sql)
    record.sql = summary
    record.params = None
    duration = getattr(record, "duration", None)
    alias = getattr(record, "alias", None)
    if isinstance(duration, float):
        record.msg, record.args = "(%.3f) %s; alias=%s", (duration, summary, alias)
    else:
        record.msg, record.args = "%s", (summary,)


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return chain


def _holds_database_error(exc: BaseException) -> bool:
    import sqlite3

    from django.db import Error as DjangoDatabaseError

    kinds: tuple[type[BaseException], ...] = (DjangoDatabaseError, sqlite3.Error)
    try:
        import psycopg

        kinds = (*kinds, psycopg.Error)
    except ImportError:  # pragma: no cover - psycopg is a pinned requirement
        pass
    return any(isinstance(e, kinds) for e in _exception_chain(exc))


def _withheld_traceback(exc: BaseException) -> str:
    parts: list[str] = []
    for i, e in enumerate(reversed(_exception_chain(exc))):
        if i:
            parts.append("\nThe above exception led to the following one:\n\n")
        tb: TracebackType | None = e.__traceback__
        parts.append("Traceback (most recent call last):\n")
        parts.extend(traceback.format_tb(tb))
        parts.append(f"{type(e).__module__}.{type(e).__qualname__}: (message withheld: it may quote row data)\n")
    return "".join(parts).rstrip("\n")
