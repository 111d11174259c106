"""Logging filters that keep user data out of logs (docs/privacy.md)."""
from __future__ import annotations

import logging
import re


class RedactQueryString(logging.Filter):
    """Drop the query string from access-log request lines.

    Staff search the admin by account id (`/admin/chat/chatlog/?q=<id>`), and
    change-page links carry the changelist's filters, so a logged query string
    can hold an account id. Paths keep only ids of our own rows (sessions,
    logs), which are fine to log. Applies to `django.server` records, whose
    first argument is the request line (`GET /path?query HTTP/1.1`).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and args and isinstance(args[0], str) and "?" in args[0]:
            record.args = (redact_request_line(args[0]), *args[1:])
        return True


def redact_request_line(line: str) -> str:
    """`GET /a?q=secret HTTP/1.1` -> `GET /a?… HTTP/1.1`: every query string cut."""
    return _QUERY.sub("?…", line)


_QUERY = re.compile(r"\?\S*")
