"""Query strings stay out of the access log (docs/privacy.md)."""
from __future__ import annotations

import logging

import pytest

from silvia.log_filters import RedactQueryString, redact_request_line


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("GET /admin/chat/chatlog/?q=FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U HTTP/1.1", "GET /admin/chat/chatlog/?… HTTP/1.1"),
        ("GET /api/chat/sessions/ HTTP/1.1", "GET /api/chat/sessions/ HTTP/1.1"),
        ("GET /a?x=1&y=2 HTTP/1.0", "GET /a?… HTTP/1.0"),
    ],
)
def test_redact_request_line(line, expected):
    assert redact_request_line(line) == expected


def test_filter_rewrites_the_access_log_record():
    record = logging.LogRecord("django.server", logging.INFO, __file__, 1, '"%s" %s %s', ("GET /admin/?q=secret-account-id-123 HTTP/1.1", "200", "12"), None)
    assert RedactQueryString().filter(record) is True
    assert record.getMessage() == '"GET /admin/?… HTTP/1.1" 200 12'
    assert "secret" not in record.getMessage()


def test_access_log_is_configured_with_the_filter():
    handler = next(h for h in logging.getLogger("django.server").handlers)
    assert any(isinstance(f, RedactQueryString) for f in handler.filters)
