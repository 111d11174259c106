"""Unit tests of the privacy log filters (docs/privacy.md); end to end in tests/silvia/test_privacy_logs_operator.py and
tests/silvia/test_privacy_logs_in_process.py."""

from __future__ import annotations

import errno
import logging

import pytest
from django.db import IntegrityError

from silvia.log_filters import BadRequestWarning, PrivacyFilter, QuietHealthCheck, redact_url, statement_summary

ACCOUNT = "FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U"
SESSION = "3f2b6a2e-8b1c-4f5e-9d7a-1b2c3d4e5f60"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"GET /admin/chat/chatlog/?q={ACCOUNT} HTTP/1.1", "GET /admin/chat/chatlog/?… HTTP/1.1"),
        ("GET /api/chat/sessions/ HTTP/1.1", "GET /api/chat/sessions/ HTTP/1.1"),
        ("/chat/?x=1&y=2", "/chat/?…"),
        (f"/accounts/{ACCOUNT}", "/accounts/…"),
        (f"/accounts/{ACCOUNT}/history?x=1", "/accounts/…/history?…"),
        ("Is this a question?", "Is this a question?"),
        # A segment the routes did not write is masked, wherever the account id was typed (issue 20's red team).
        (f"GET /ACCOUNTS/{ACCOUNT} HTTP/1.1", "GET /…/… HTTP/1.1"),
        (f"GET /api/chat/sessions/{ACCOUNT}/ HTTP/1.1", "GET /api/chat/sessions/…/ HTTP/1.1"),
        (f"POST /api/chat/sessions/{ACCOUNT}/turns/ HTTP/1.1", "POST /api/chat/sessions/…/turns/ HTTP/1.1"),
        (f"GET /chat/{ACCOUNT}/ HTTP/1.1", "GET /chat/…/ HTTP/1.1"),
        (f"GET /{ACCOUNT} HTTP/1.1", "GET /… HTTP/1.1"),
        # Ids too: an account id can be a UUID, as sessions' and turns' are. Numbers and static files stay.
        (f"GET /accounts/{SESSION} HTTP/1.1", "GET /accounts/… HTTP/1.1"),
        (f"GET /api/chat/turns/{SESSION}/events?after=3 HTTP/1.1", "GET /api/chat/turns/…/events?… HTTP/1.1"),
        ("GET /admin/r/12/34/ HTTP/1.1", "GET /admin/r/12/34/ HTTP/1.1"),
        ("GET /static/pages/pages.0123abcd.css HTTP/1.1", "GET /static/pages/pages.0123abcd.css HTTP/1.1"),
        ("GET /favicon.ico HTTP/1.1", "GET /favicon.ico HTTP/1.1"),
    ],
)
def test_redact_url(text, expected):
    assert redact_url(text) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            f'INSERT INTO "ai_chat_logs" ("id", "citations") VALUES (\'x\', \'[{{"accountId": "{ACCOUNT}"}}]\')',
            'INSERT INTO "ai_chat_logs"',
        ),
        ('3 times: INSERT INTO "auth_user" ("username") VALUES (%s)', 'INSERT INTO "auth_user"'),
        (f'UPDATE "ai_chat_logs" SET "citations" = \'{ACCOUNT}\'', 'UPDATE "ai_chat_logs"'),
        (
            f'SELECT "ai_chat_logs"."id" FROM "ai_chat_logs" WHERE "account_ids" LIKE \'%|{ACCOUNT}|%\'',
            'SELECT "ai_chat_logs"',
        ),
        (f'SELECT COUNT(*) AS "__count" FROM "ai_chat_logs" WHERE x = \'{ACCOUNT}\'', "SELECT"),
        (f"'{ACCOUNT}'", "SQL"),
    ],
)
def test_statement_summary_keeps_no_value(sql, expected):
    assert statement_summary(sql) == expected


def _record(name, msg, args, **extra):
    record = logging.LogRecord(name, logging.DEBUG, __file__, 1, msg, args, None)
    record.__dict__.update(extra)
    return record


def test_sql_debug_record_loses_its_text_and_params():
    sql = f'INSERT INTO "ai_chat_logs" ("citations") VALUES (\'[{{"accountId": "{ACCOUNT}"}}]\')'
    record = _record(
        "django.db.backends",
        "(%.3f) %s; args=%s; alias=%s",
        (0.0012, sql, (ACCOUNT,), "default"),
        duration=0.0012,
        sql=sql,
        params=(ACCOUNT,),
        alias="default",
    )
    assert PrivacyFilter().filter(record) is True
    assert record.getMessage() == '(0.001) INSERT INTO "ai_chat_logs"; alias=default'
    assert ACCOUNT not in str(record.__dict__)


def test_schema_record_loses_its_params():
    record = _record(
        "django.db.backends.schema",
        "%s; (params %r)",
        ("ALTER TABLE x", [ACCOUNT]),
        sql="ALTER TABLE x",
        params=[ACCOUNT],
    )
    PrivacyFilter().filter(record)
    assert record.getMessage() == "ALTER"
    assert ACCOUNT not in str(record.__dict__)


def test_uvicorn_access_record_loses_its_query_string():
    record = _record(
        "uvicorn.access", '%s - "%s %s HTTP/%s" %d', ("127.0.0.1:5000", "GET", f"/admin/?q={ACCOUNT}", "1.1", 200)
    )
    PrivacyFilter().filter(record)
    assert record.getMessage() == '127.0.0.1:5000 - "GET /admin/?… HTTP/1.1" 200'


def test_a_database_error_traceback_keeps_frames_but_no_message():
    try:
        try:
            raise ValueError(f"Failing row contains ({ACCOUNT})")
        except ValueError as inner:
            raise IntegrityError(f"duplicate key: Key (x)=({ACCOUNT}) already exists") from inner
    except IntegrityError:
        record = logging.LogRecord(
            "django.request", logging.ERROR, __file__, 1, "Internal Server Error: %s", ("/x",), None
        )
        import sys

        record.exc_info = sys.exc_info()
    PrivacyFilter().filter(record)
    text = logging.Formatter().format(record)
    assert ACCOUNT not in text
    assert "django.db.utils.IntegrityError: (message withheld: it may quote user data)" in text
    assert "builtins.ValueError: (message withheld" in text
    assert "test_log_filters.py" in text  # the frames are kept


def _raised(exc: BaseException):
    import sys

    try:
        raise exc
    except BaseException:
        return sys.exc_info()


def test_every_traceback_loses_its_messages_whatever_the_exception():
    # The SDK's error for tool input it cannot parse quotes the input (issue 20).
    sdk_error = ValueError(f'Unable to parse tool parameter JSON from model. JSON: {{"query": "{ACCOUNT}"')
    for exc in (sdk_error, RuntimeError(ACCOUNT), KeyError(ACCOUNT)):
        record = logging.LogRecord("live.runner", logging.ERROR, __file__, 1, "turn %s failed", ("t1",), _raised(exc))
        PrivacyFilter().filter(record)
        PrivacyFilter().filter(record)  # a second handler sees the same record
        text = logging.Formatter().format(record)
        assert ACCOUNT not in text
        assert f"builtins.{type(exc).__name__}: (message withheld: it may quote user data)" in text
        assert text.startswith("turn t1 failed\nTraceback (most recent call last):")


def test_an_exception_passed_as_the_message_or_an_argument_is_named_not_printed():
    error = ValueError(f"bad input {ACCOUNT}")
    as_message = logging.LogRecord("x", logging.ERROR, __file__, 1, error, None, None)
    as_argument = logging.LogRecord("x", logging.WARNING, __file__, 1, "tool failed: %s", (error,), None)
    as_mapping = logging.LogRecord("x", logging.WARNING, __file__, 1, "tool failed: %(e)s", ({"e": error},), None)
    for record in (as_message, as_argument, as_mapping):
        PrivacyFilter().filter(record)
        assert ACCOUNT not in record.getMessage()
        assert "builtins.ValueError (message withheld)" in record.getMessage()


def test_a_text_traceback_formatted_elsewhere_is_withheld():
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", None, None)
    record.exc_text = f"Traceback ...\nValueError: {ACCOUNT}"
    PrivacyFilter().filter(record)
    assert ACCOUNT not in logging.Formatter().format(record)


def test_template_records_keep_their_message_only():
    from django.template import Context
    from django.template.base import VariableDoesNotExist

    context = Context({"account_names": {ACCOUNT: "Sapphire card"}, "title": "How much do I owe?"})
    exc_info = _raised(VariableDoesNotExist("Failed lookup for key [%s] in %r", ("nav", context)))
    for level in (logging.DEBUG, logging.INFO, logging.ERROR):
        record = logging.LogRecord(
            "django.template",
            level,
            __file__,
            1,
            "Exception while resolving variable '%s' in template '%s'.",
            ("nav", "pages/session_list.html"),
            exc_info,
        )
        PrivacyFilter().filter(record)
        text = logging.Formatter().format(record)
        assert text == "Exception while resolving variable 'nav' in template 'pages/session_list.html'."


def test_the_request_a_record_carries_is_dropped():
    from django.test import RequestFactory

    request = RequestFactory().post("/api/chat/sessions/x/turns/", {"message": f"my account {ACCOUNT}"})
    record = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "Internal Server Error: %s", ("/x",), None)
    record.__dict__.update(request=request, status_code=500)  # Django's `extra=`
    PrivacyFilter().filter(record)
    assert record.__dict__["request"] is None
    assert ACCOUNT not in str(record.__dict__)


@pytest.mark.parametrize(
    ("name", "args", "kept"),
    [
        ("uvicorn.access", ("127.0.0.1:1", "GET", "/healthz", "1.1", 200), False),
        ("uvicorn.access", ("127.0.0.1:1", "GET", "/healthz", "1.1", 503), True),
        ("uvicorn.access", ("127.0.0.1:1", "GET", "/readyz", "1.1", 200), False),
        ("uvicorn.access", ("127.0.0.1:1", "GET", "/readyz", "1.1", 503), True),
        ("django.server", ("GET /readyz HTTP/1.1", "200", "15"), False),
        ("uvicorn.access", ("127.0.0.1:1", "GET", "/admin/", "1.1", 200), True),
        ("django.server", ("GET /healthz HTTP/1.1", "200", "15"), False),
        ("django.server", ("GET /healthz HTTP/1.1", "503", "15"), True),
    ],
)
def test_quiet_healthz(name, args, kept):
    record = _record(name, "%s", args)
    assert QuietHealthCheck().filter(record) is kept


@pytest.mark.parametrize("name", ["django", "django.server", "uvicorn", "uvicorn.access", "root"])
def test_every_handler_carries_the_privacy_filter(name):
    logger = logging.getLogger() if name == "root" else logging.getLogger(name)
    while not logger.handlers and logger.parent is not None:
        logger = logger.parent
    ours = [h for h in logger.handlers if not type(h).__module__.startswith("_pytest")]  # pytest's capture
    assert ours
    for handler in ours:
        assert any(isinstance(f, PrivacyFilter) for f in handler.filters)


def test_a_logged_path_loses_its_account_segment():
    # Django logs every 4xx with the path: `/accounts/<id>` pages (docs/pages.md) put an id there.
    record = _record("django.request", "Not Found: %s", (f"/accounts/{ACCOUNT}",))
    PrivacyFilter().filter(record)
    assert record.getMessage() == "Not Found: /accounts/…"


def test_a_driver_line_keeps_what_it_was_doing_not_the_server_error():
    # psycopg.pool logs the server's error text, which may quote a row's values.
    record = _record(
        "psycopg.pool",
        "error connecting in %r: %s",
        ("pool-1", f"connection failed: duplicate key value (account_id)=({ACCOUNT})"),
    )
    PrivacyFilter().filter(record)
    assert record.getMessage() == "error connecting in 'pool-1'"


@pytest.mark.parametrize("name", ["anthropic._base_client", "httpx", "httpcore.http11"])
def test_http_client_debug_lines_are_dropped(name):
    # The SDK logs each request whole at DEBUG: the tool results hold account ids.
    record = _record(name, "Request options: %s", ({"json_data": {"messages": [ACCOUNT]}},))
    assert PrivacyFilter().filter(record) is False


def test_http_client_warnings_still_pass():
    record = _record("anthropic._base_client", "Retrying request to %s in %s seconds", ("/v1/messages", 0.5))
    record.levelno, record.levelname = logging.WARNING, "WARNING"
    assert PrivacyFilter().filter(record) is True


def test_an_oserror_keeps_its_errno_and_loses_its_message():
    # uvicorn's bind failure: the errno says why, the message would also name the address (or a file name).
    error = OSError(errno.EADDRINUSE, f"error while attempting to bind on address ('{ACCOUNT}', 8000)")
    record = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "start failed", None, _raised(error))
    PrivacyFilter().filter(record)
    text = logging.Formatter().format(record)
    assert ACCOUNT not in text
    assert "builtins.OSError [EADDRINUSE: Address already in use]: (message withheld: it may quote user data)" in text
    as_argument = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed: %s", (error,), None)
    PrivacyFilter().filter(as_argument)
    label = "builtins.OSError [EADDRINUSE: Address already in use]"
    assert as_argument.getMessage() == f"failed: {label} (message withheld)"


def test_a_bad_host_is_one_warning_line_without_traceback():
    # What Django logs for a Host not in ALLOWED_HOSTS (tests/silvia/test_privacy_logs_hostile_requests.py sends them).
    from django.core.exceptions import DisallowedHost

    try:
        raise DisallowedHost(f"Invalid HTTP_HOST header: '{ACCOUNT}'.")
    except DisallowedHost as error:
        record = logging.LogRecord(
            "django.security.DisallowedHost", logging.ERROR, __file__, 1, str(error), (), (type(error), error, None)
        )
    for kept in (BadRequestWarning(), PrivacyFilter()):
        assert kept.filter(record)
    text = logging.Formatter("%(levelname)s %(name)s: %(message)s").format(record)
    assert text == "WARNING django.security.DisallowedHost: (message withheld: it may quote the request)"
    other = _record("django.request", "Internal Server Error: %s", ("/x",))
    other.levelno, other.levelname = logging.ERROR, "ERROR"
    BadRequestWarning().filter(other)
    assert other.levelname == "ERROR"  # a server error stays one
