"""Logging filters that keep user data out of every log handler (docs/privacy.md).

`PrivacyFilter` sits on every handler of `settings.LOGGING`, so it sees records
of every logger, ours, Django's, uvicorn's and any library's, at every level.
A filter on a logger would miss records propagated from its children.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import traceback
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

# Records of `django.db.backends` (and `.schema`) carry the statement in
# `sql` and its values in `params`. The SQL text itself holds the values too
# (SQLite's and psycopg's client-side binding inline them), so neither is kept.
_STATEMENT = re.compile(
    r"^\s*(?:\d+ times: )?"
    r'(?:(INSERT INTO|UPDATE|DELETE FROM)\s+"?(\w+)"?(?=[\s(;]|$)|(SELECT)\s+(?:DISTINCT\s+)?"(\w+)"\.|(\w+))',
    re.IGNORECASE,
)
#: Loggers of HTTP clients whose DEBUG lines carry request bodies (the anthropic SDK's).
_HTTP_CLIENT_LOGGERS = frozenset(
    {"anthropic", "httpx", "httpcore", "httpx2", "httpcore2"}
)  # the SDK's own fork: httpx2
# A request target in absolute form (`http://host/path`, legal HTTP/1.1; uvicorn logs `http%3A//host/path`):
# its scheme and host are masked whole, its path like any other.
_ABSOLUTE = r"(?:[Hh][Tt][Tt][Pp][Ss]?(?::|%3[Aa])//[^/\s?\"]*)"
_URLISH = re.compile(rf"^(?:[A-Z]+ )?{_ABSOLUTE}?/")
_QUERY = re.compile(r"\?[^\s\"]*")
_PATH = re.compile(rf"^((?:[A-Z]+ )?)({_ABSOLUTE}?)(/[^\s?\"]*)")
_NAMED_GROUP = re.compile(r"\(\?P<\w+>[^)]*\)")
_WORD = re.compile(r"[A-Za-z0-9_.-]+")
_route_words: dict[str, frozenset[str]] = {}  # by ROOT_URLCONF
_ACCESS_LOGGERS = ("uvicorn.access", "gunicorn.access", "django.server")
_PROBES = ("/healthz", "/readyz")


class PrivacyFilter(logging.Filter):
    """Rewrite a record so that no user data (account ids and names, questions, SQL the model
    wrote, tool input, targets, citation JSON) can reach a handler, whatever the caller passed.

    - Every traceback keeps its frames and exception classes, but no exception
      message: the SDK's `ValueError` for tool input it cannot parse quotes the
      input, `IntegrityError` quotes row values, a template's
      `VariableDoesNotExist` quotes its whole context. An exception passed as
      the message or as an argument becomes its class name.
    - `django.template` records keep their message only (variable and
      template names): no traceback, no context, at every level.
    - The `request` a record carries (Django's `extra`) is dropped, so no
      handler can render the request, its body or Django's technical 500 page.
    - SQL debug records: the message becomes `(seconds) VERB "table"; alias=…`;
      `sql` and `params` keep only that too.
    - Any string argument that is a path or request line (`/a?b`, `GET /a?b HTTP/1.1`, and in absolute form
      `GET http://host/a?b HTTP/1.1`): the query string becomes `?…`, the scheme and host `…`, and each path
      segment that is no word of the routes `…` (`redact_url`).
    - `django.security.*` records keep their logger's name (the exception's class) but not their message,
      the exception's text (`DisallowedHost` quotes the `Host` header); gunicorn's `Invalid request from
      ip=…` keeps the address but not what its parser refused (a header, a transfer coding, a chunk size).
    Drops the DEBUG records of HTTP clients (whole requests); otherwise
    returns True (it redacts).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        sql = getattr(record, "sql", None)
        if isinstance(sql, str):
            _redact_sql_record(record, sql)
        elif isinstance(record.args, tuple) and record.args:
            record.args = tuple(_redact_argument(a) for a in record.args)
        elif isinstance(record.args, Mapping) and record.args:
            record.args = {key: _redact_argument(value) for key, value in record.args.items()}
        if isinstance(record.msg, BaseException):
            record.msg = _exception_name(record.msg)
        if getattr(record, "request", None) is not None:
            record.request = None
        if record.name == "django.template" or record.name.startswith("django.template."):
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        elif record.exc_info and record.exc_info[1] is not None:
            record.exc_text = _withheld_traceback(record.exc_info[1])
            record.exc_info = None
        elif record.exc_text and not getattr(record, "silvia_withheld", False):
            # Formatted before it reached us (a queue handler): its text is unknown.
            record.exc_text = "(traceback withheld: it may quote user data)"
        record.silvia_withheld = True
        if record.levelno < logging.INFO and record.name.partition(".")[0] in _HTTP_CLIENT_LOGGERS:
            # The SDK's and httpx's debug lines print whole requests: the user's
            # message and the tool results, account ids and balances included.
            return False
        if record.name.startswith("django.security."):
            # Django's message is the exception's text, which quotes the request: DisallowedHost its Host
            # header. The logger's name says which exception it was.
            record.msg, record.args = "(message withheld: it may quote the request)", ()
        if record.name == "gunicorn.error" and str(record.msg).startswith("Invalid request from ip="):
            # gunicorn's parser quotes what it refused (a header, a transfer coding, a chunk size), pre-formatted.
            record.msg, record.args = str(record.msg).split(": ", 1)[0] + ": (what it refused withheld)", ()
        if record.name.startswith("psycopg"):
            # The driver's own lines (the connection pool's) quote the server's
            # error, which can quote row values: keep what it was doing only.
            record.msg = record.getMessage().split(":", 1)[0]
            record.args = ()
        return True


class BadRequestWarning(logging.Filter):
    """A `django.security.*` record is one WARNING line, without its traceback (docs/deploying.md#logging).

    Django logs a client's bad request (a `Host` header not in `ALLOWED_HOSTS`, another suspicious
    operation: Django answers it 400) as an ERROR with the traceback of its own request handling, 16
    lines a request anyone can send. The logger's name says what it was; the message stays the privacy
    filter's (it would quote the request).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("django.security.") and record.levelno > logging.WARNING:
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


class QuietHealthCheck(logging.Filter):
    """Drop access-log lines of a healthy `/healthz` or `/readyz` probe (status below 400); keep failures."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "gunicorn.access" and isinstance(record.args, Mapping):
            # gunicorn's atoms: `U` the path, `s` the status.
            path, code = str(record.args.get("U", "")), str(record.args.get("s", ""))
            return not (path in _PROBES and code.isdigit() and int(code) < 400)
        if record.name not in _ACCESS_LOGGERS or not isinstance(record.args, tuple):
            return True
        strings = [a for a in record.args if isinstance(a, str)]
        status = next((a for a in record.args[1:] if isinstance(a, int) or (isinstance(a, str) and a.isdigit())), None)
        is_probe = any(s in _PROBES or s.startswith(tuple(f"GET {p} " for p in _PROBES)) for s in strings)
        return not (is_probe and status is not None and int(status) < 400)


def redact_url(text: str) -> str:
    """`GET /a?q=secret HTTP/1.1` -> `GET /a?… HTTP/1.1`; `/accounts/<id>/x` -> `/accounts/…/x`.

    Only a string that starts with a path (optionally after an HTTP method, and
    optionally in absolute form, `http://host/a`, whose scheme and host become
    `…`) is touched; any other string is returned unchanged. In the path, a segment
    stays only when it is a word of the URL routes (`api`, `sessions`,
    `accounts`, ...) or a number; any other becomes `…`, ids included (an
    account id can be a UUID too), so an account id stays out however it got
    into a path (the account pages' `/accounts/<id>`, a mistyped
    `/ACCOUNTS/<id>`, `/api/chat/sessions/<id>`). Paths under `STATIC_URL`
    stay whole.
    """
    if not _URLISH.match(text):
        return text
    text = _QUERY.sub("?…", text)
    match = _PATH.match(text)
    if match is None:
        return text
    method, origin, path = match.groups()
    return method + ("…" if origin else "") + _redact_path(path) + text[match.end() :]


def _redact_path(path: str) -> str:
    static = _static_prefix()
    if static and path.startswith(static):
        return path
    words = _known_route_words()
    return "/".join(
        segment if not segment or segment in words or segment.isdigit() else "…" for segment in path.split("/")
    )


def _static_prefix() -> str | None:
    try:
        from django.conf import settings

        return settings.STATIC_URL
    except Exception:  # settings not configured: nothing is static
        return None


def _known_route_words() -> frozenset[str]:
    """The literal words of the URL routes (`admin/chat/chatlog/` -> admin, chat, chatlog), read from the
    resolver once per URLconf; while it cannot be loaded yet, none (every segment but a number is masked)."""
    try:
        from django.conf import settings
        from django.urls import get_resolver

        urlconf = settings.ROOT_URLCONF
        if urlconf not in _route_words:
            words: set[str] = set()
            _collect_route_words(get_resolver(urlconf).url_patterns, words)
            _route_words[urlconf] = frozenset(words)
        return _route_words[urlconf]
    except Exception:
        return frozenset()


def _collect_route_words(patterns: Iterable[Any], words: set[str]) -> None:
    for entry in patterns:
        words.update(_WORD.findall(_without_converters(_NAMED_GROUP.sub("", str(entry.pattern)))))
        if hasattr(entry, "url_patterns"):
            _collect_route_words(entry.url_patterns, words)


def _without_converters(route: str) -> str:
    """`sessions/<uuid:pk>/` -> `sessions//`: a converter's name is no word of the path."""
    return re.sub(r"<[^>]*>", "", route)


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


def _redact_argument(value: object) -> object:
    if isinstance(value, str):
        return redact_url(value)
    if isinstance(value, BaseException):
        return _exception_name(value)
    return value


def _exception_label(exc: BaseException) -> str:
    """The class, and for an `OSError` its errno's name and text: fixed by the errno, they quote no user data
    (its message can: a file name, an address), and they say why a port or a file failed."""
    label = f"{type(exc).__module__}.{type(exc).__qualname__}"
    code = exc.errno if isinstance(exc, OSError) else None
    if isinstance(code, int) and code in errno.errorcode:
        label += f" [{errno.errorcode[code]}: {os.strerror(code)}]"
    return label


def _exception_name(exc: BaseException) -> str:
    return f"{_exception_label(exc)} (message withheld)"


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return chain


def _withheld_traceback(exc: BaseException) -> str:
    parts: list[str] = []
    for i, e in enumerate(reversed(_exception_chain(exc))):
        if i:
            parts.append("\nThe above exception led to the following one:\n\n")
        tb: TracebackType | None = e.__traceback__
        parts.append("Traceback (most recent call last):\n")
        parts.extend(traceback.format_tb(tb))
        parts.append(f"{_exception_label(e)}: (message withheld: it may quote user data)\n")
    return "".join(parts).rstrip("\n")
