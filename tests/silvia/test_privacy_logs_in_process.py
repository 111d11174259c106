"""No user data reaches any log output in the test process, at DEBUG level, with `DEBUG` off and on
(docs/privacy.md), every handler's output captured: the import, the API and the admin search, the pages, a
live turn whose tool input is not JSON, a 500 and a database error. Also: the scans find every account id
of the examples."""

from __future__ import annotations

import io
import json
import logging.config
import sys
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.test.utils import override_settings
from django.urls import path as url_path
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from chat.models import ChatSession
from silvia.logging_config import build_logging
from silvia.urls import urlpatterns as project_urlpatterns
from tests.live_support import parse_sse, step, text
from tests.silvia.privacy_support import (
    _ID_KEYS,
    EXAMPLES,
    _walk,
    assert_no_user_data,
    bad_tool_input_step,
    demo_account_ids,
    example_account_ids,
    example_user_texts,
    maya_account_paths,
    seed_pages_data,
)


def test_the_examples_hold_account_ids():
    # The regular expression the scans use finds exactly the ids a JSON walk finds.
    walked = {
        value
        for path in EXAMPLES.glob("*.json")
        for key, value in _walk(json.loads(path.read_text(encoding="utf-8")))
        if key in _ID_KEYS and isinstance(value, str)
    }
    assert walked and example_account_ids() == walked
    assert example_user_texts() and demo_account_ids()


@pytest.mark.django_db
def test_in_process_import_api_and_admin_search_log_no_account_id(debug_log, capfd):
    maya = User.objects.create_user(username="maya")
    User.objects.create_user(username="sam")
    staff = User.objects.create_superuser("staff", password="staff-password-1")
    command_output = io.StringIO()
    call_command("import_turns", str(EXAMPLES), stdout=command_output, stderr=command_output)

    api = Client(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=maya).key}")
    for session in api.get("/api/chat/sessions/").json()["results"]:
        assert api.get(f"/api/chat/sessions/{session['id']}/").status_code == 200
    admin = Client()
    admin.force_login(staff)
    found = 0
    for account_id in sorted(example_account_ids()):
        page = admin.get("/admin/chat/chatlog/", {"q": account_id}).content.decode()
        found += "/change/?_changelist_filters=" in page
    assert found >= 5
    # A database error inside a request: its traceback is logged without its message.
    logging.getLogger("django.request").error(
        "boom", exc_info=_integrity_error_quoting(sorted(example_account_ids())[0])
    )

    captured = capfd.readouterr()
    output = "\n".join([debug_log.getvalue(), command_output.getvalue(), captured.out, captured.err])
    assert 'INSERT INTO "ai_chat_logs"' in output  # SQL debug logging was on
    assert "(message withheld: it may quote user data)" in output
    assert "Logging error" not in output
    assert_no_user_data(output)


@pytest.fixture(params=[False, True], ids=["DEBUG=False", "DEBUG=True"])
def debug_level_log(request, settings):
    """Every logger at DEBUG through the production handlers, into the returned buffer, with
    Django's DEBUG off or on (the parameter)."""
    buffer = io.StringIO()
    logging.config.dictConfig(build_logging("DEBUG"))
    for name in ("", "django", "django.server", "uvicorn", "uvicorn.access"):
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler) and not type(handler).__module__.startswith("_pytest"):
                handler.setStream(buffer)
    # Through pytest-django's `settings`, not a nested `override_settings`: other fixtures of the test
    # (the recorded model's) change settings through it too, and overrides undone out of order left
    # DEBUG on for every later test.
    settings.DEBUG = request.param
    yield buffer
    logging.config.dictConfig(settings.LOGGING)


@pytest.mark.django_db
def test_pages_at_debug_level_log_no_user_data(debug_level_log):
    maya = User.objects.create_user(username="maya")
    seed_pages_data(maya)
    call_command("import_turns", str(EXAMPLES), stdout=io.StringIO(), stderr=io.StringIO())
    pages = Client()
    pages.force_login(maya)
    paths = ["/chat/", "/chat/new/", "/portfolio/", *maya_account_paths(maya), "/accounts/no-such-account"]
    paths += [f"/chat/{session.id}/" for session in ChatSession.objects.filter(user=maya)]
    statuses = [pages.get(path).status_code for path in paths]
    assert statuses == [200] * 3 + [200] * (len(paths) - 4 - 4) + [404] + [200] * 4
    output = debug_level_log.getvalue()
    # Templates logged their missing variables (the leak issue 20 found), as messages only.
    assert "DEBUG django.template: Exception while resolving variable" in output
    assert "Traceback" not in output
    assert_no_user_data(output)


@pytest.mark.django_db(transaction=True)
def test_live_turn_with_bad_tool_input_logs_no_user_data(debug_level_log, recorded_model, maya):
    account_id = sorted(example_account_ids())[0]
    recorded_model.load([{"name": "bad input", "steps": [bad_tool_input_step(account_id), step(text("Sorry."))]}])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=maya).key}")
    response: Any = api.post(f"/api/chat/sessions/{uuid.uuid4()}/turns/", {"message": "cards?"}, format="json")
    events = parse_sse(b"".join(response.streaming_content))
    assert events[-1][1] == "done"
    assert recorded_model.requests[1]["messages"][-1]["content"][0]["is_error"] is True
    from tests.live_support import wait_for_turns

    assert wait_for_turns(30)
    output = debug_level_log.getvalue()
    assert "DEBUG" in output  # the DEBUG level was on
    assert account_id not in output and "account_details" not in output
    assert_no_user_data(output)


def _fail_with_user_data(request):
    """A view failing with user data in its locals and its exception (a tool or the SDK failing mid-request)."""
    account_names = {sorted(example_account_ids())[0]: "Sapphire card"}
    raise RuntimeError(f"failed for {sorted(account_names)[0]}: {sorted(example_user_texts())[0]}")


urlpatterns = [url_path("fail/", _fail_with_user_data), *project_urlpatterns]


@pytest.mark.django_db
def test_a_500_at_debug_level_logs_no_user_data(debug_level_log, maya):
    client = Client(raise_request_exception=False)
    client.force_login(maya)
    with override_settings(ROOT_URLCONF=__name__):
        response = client.get("/fail/", {"q": sorted(example_account_ids())[1]})
    assert response.status_code == 500
    output = debug_level_log.getvalue()
    assert "ERROR django.request: Internal Server Error: /fail/" in output
    assert "builtins.RuntimeError: (message withheld: it may quote user data)" in output
    assert_no_user_data(output)


def _integrity_error_quoting(value: str):
    from django.db import IntegrityError

    try:
        raise IntegrityError(f"Failing row contains ({value})")
    except IntegrityError:
        return sys.exc_info()
