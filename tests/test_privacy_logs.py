"""No user data reaches any log output, at DEBUG level, with `DJANGO_DEBUG` false and true (docs/privacy.md).

User data here: the examples' account ids (and targets' JSON), the users'
questions and session titles, and the demo accounts' ids. Two kinds of run:
an operator's run (real `manage.py import_turns` and uvicorn processes, all
their output read: the import, the API, the admin search by account id, every
page, and a live turn whose tool input is not JSON), and the same
steps in the test process (every handler's output captured).
"""

from __future__ import annotations

import http.cookiejar
import io
import json
import logging.config
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
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
from devtools.recorded_model import message_events
from silvia.logging_config import build_logging
from silvia.urls import urlpatterns as project_urlpatterns
from tests.live_support import parse_sse, step, text, tool_use
from tests.uvicorn_server import ROOT, subprocess_database_url, uvicorn_server

EXAMPLES = ROOT / "examples" / "turns"
_ID_KEYS = (
    "source_account_id",
    "snaptrade_account_id",
    "manual_account_uuid",
    "account_uuid",
    "account_id",
    "accountId",
)


def example_account_ids() -> set[str]:
    """Every account id in examples/turns (the id columns of docs/accounts.md and `accountId` of targets)."""
    ids: set[str] = set()
    for path in EXAMPLES.glob("*.json"):
        keys = "|".join(_ID_KEYS)
        ids |= set(re.findall(rf'"(?:{keys})":\s*"([^"]+)"', path.read_text(encoding="utf-8")))
    return ids


def _walk(value: object):
    """Every (key, value) pair of a JSON document, at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def example_user_texts() -> set[str]:
    """The users' questions and session titles in examples/turns."""
    texts: set[str] = set()
    for path in EXAMPLES.glob("*.json"):
        for key, value in _walk(json.loads(path.read_text(encoding="utf-8"))):
            if key == "user_message" or (key == "session" and isinstance(value, dict)):
                texts.add(value if key == "user_message" else value.get("title"))
    return {text for text in texts if isinstance(text, str) and text}


def demo_account_ids() -> set[str]:
    """The ids of maya's and sam's demo accounts (finance/demo_data.py)."""
    from finance.demo_data import MAYA, SAM

    return {account[key] for *_, accounts in MAYA + SAM for account in accounts for key in _ID_KEYS if key in account}


def assert_no_account_id(output: str) -> None:
    """Fail naming the first account id found in `output`, and where."""
    for account_id in sorted(example_account_ids() | demo_account_ids()):
        at = output.find(account_id)
        assert at < 0, f"account id {account_id} logged: …{output[max(0, at - 200) : at + 80]}…"
    assert '"accountId"' not in output  # nor a target's JSON


def assert_no_user_data(output: str) -> None:
    """No account id, target JSON, question or session title in `output`."""
    assert_no_account_id(output)
    for user_text in sorted(example_user_texts()):
        at = output.find(user_text)
        assert at < 0, f"user text {user_text!r} logged: …{output[max(0, at - 200) : at + 80]}…"


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


class Browser:
    """A cookie-keeping HTTP client for one server (urllib; redirects followed)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))

    def get(self, path: str, headers: dict[str, str] | None = None) -> str:
        request = urllib.request.Request(self.base_url + path, headers=headers or {})
        with self.opener.open(request, timeout=30) as response:
            return response.read().decode()

    def post_form(self, path: str, form: dict[str, str]) -> str:
        data = urllib.parse.urlencode(form).encode()
        with self.opener.open(self.base_url + path, data=data, timeout=30) as response:
            return response.read().decode()

    def post_json(self, path: str, body: object, headers: dict[str, str]) -> str:
        request = urllib.request.Request(
            self.base_url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **headers},
        )
        with self.opener.open(request, timeout=30) as response:
            return response.read().decode()

    def login(self, username: str, password: str) -> None:
        """Sign in to the pages (`/login/`)."""
        page = self.get("/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert csrf
        landing = self.post_form(
            "/login/", {"csrfmiddlewaretoken": csrf.group(1), "username": username, "password": password}
        )
        assert "Log out" in landing or "logout" in landing.lower()

    def admin_login(self, username: str, password: str) -> None:
        page = self.get("/admin/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert csrf
        landing = self.post_form(
            "/admin/login/?next=/admin/",
            {"csrfmiddlewaretoken": csrf.group(1), "username": username, "password": password, "next": "/admin/"},
        )
        assert "Log out" in landing or "logout" in landing


def _debug_env(database_url: str, static_root: Path, debug: bool) -> dict[str, str]:
    # What an operator sets to see everything: DEBUG level (and with DJANGO_DEBUG on, Django logs SQL).
    return {
        "DATABASE_URL": database_url,
        "DJANGO_DEBUG": "true" if debug else "false",
        "DJANGO_SECRET_KEY": "privacy-test-key-never-used-to-serve-Qm4Rt7Wx2Zp9Lk5Vn8Bc3Hd6Jf1",
        "DJANGO_LOG_LEVEL": "DEBUG",
        "DJANGO_STATIC_ROOT": str(static_root),
        "DJANGO_SETTINGS_MODULE": "silvia.settings",
    }


#: A tool_use whose input is not JSON, quoting an account id and SQL. The SDK's own accumulator
#: raised a ValueError quoting the whole input (issue 20); the runner now answers an `is_error` result.
BAD_TOOL_INPUT = ['{"query": "SELECT * FROM account_details ', "WHERE source_account_id = '{account}'\",, }"]


def bad_tool_input_step(account_id: str) -> dict:
    """A recorded-model step streaming a `tool_use` whose input is not JSON and quotes `account_id`."""
    events = message_events({"content": [tool_use("toolu_bad", "execute_sql", {})], "stop_reason": "tool_use"})
    pieces = [piece.replace("{account}", account_id) for piece in BAD_TOOL_INPUT]
    out = []
    for name, data in events:
        if data.get("delta", {}).get("type") == "input_json_delta":
            for piece in pieces:
                out.append(
                    {"event": name, "data": {**data, "delta": {"type": "input_json_delta", "partial_json": piece}}}
                )
            pieces = []
        else:
            out.append({"event": name, "data": data})
    return {"events": out}


def seed_pages_data(maya: User) -> None:
    """maya's password (to sign in to the pages) and the demo accounts the account pages show."""
    from finance.demo import seed_demo_finance

    maya.set_password("maya-password-1")
    maya.save()
    seed_demo_finance(maya=maya, sam=User.objects.get_or_create(username="sam")[0])


def maya_account_paths(maya: User) -> list[str]:
    from citations.urls import account_path
    from finance.models import Account
    from finance.selectors import account_target_id

    ids = [account_target_id(account) for account in Account.objects.filter(user=maya)]
    return [account_path(account_id) for account_id in ids if account_id]


@pytest.mark.parametrize("debug", [False, True], ids=["DJANGO_DEBUG=false", "DJANGO_DEBUG=true"])
@pytest.mark.django_db(transaction=True)
def test_operator_run_at_debug_level_logs_no_user_data(tmp_path, collected_static, recorded_model, debug):
    maya = User.objects.create_user(username="maya")
    token = Token.objects.create(user=maya).key
    User.objects.create_superuser("staff", password="staff-password-1")
    seed_pages_data(maya)
    account_paths = maya_account_paths(maya)
    env = {**os.environ, **_debug_env(subprocess_database_url(tmp_path), collected_static, debug)}

    # 1. The example import, as a command.
    imported = subprocess.run(
        [sys.executable, "manage.py", "import_turns", str(EXAMPLES), "--create-users"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.splitlines()[-1].startswith("imported 15, skipped 0, failed 0")
    outputs = [imported.stdout, imported.stderr]
    # SQL debug logging is on with DJANGO_DEBUG only (Django logs SQL then).
    assert ('INSERT INTO "ai_chat_logs"' in imported.stderr) is debug

    bad_input = [bad_tool_input_step(sorted(example_account_ids())[0]), step(text("I could not run that."))]
    recorded_model.load([{"name": "bad input", "steps": bad_input}])
    live = {"ANTHROPIC_BASE_URL": recorded_model.base_url, "ANTHROPIC_API_KEY": "test-key", "LIVE_TOOL_FACTORIES": ""}
    with uvicorn_server(tmp_path / "server.log", {**env, **live}) as server:
        browser = Browser(server.url)
        # 2. The API: every session of maya's, with her token.
        auth = {"Authorization": f"Token {token}"}
        sessions = json.loads(browser.get("/api/chat/sessions/", auth))["results"]
        assert len(sessions) == 4
        bodies = [browser.get(f"/api/chat/sessions/{s['id']}/", auth) for s in sessions]
        served = {a for a in example_account_ids() if any(a in body for body in bodies)}
        assert len(served) >= 5  # ids that were stored and shown, so that they could have leaked
        # 3. A live turn whose tool input is not JSON: an `is_error` result, and the turn goes on.
        turn = browser.post_json(f"/api/chat/sessions/{uuid.uuid4()}/turns/", {"message": "cards?"}, auth)
        assert parse_sse(turn.encode())[-1][1] == "done"
        assert recorded_model.requests[1]["messages"][-1]["content"][0]["is_error"] is True
        # 4. The pages: signed in as maya, every session, the portfolio and each account.
        pages = Browser(server.url)
        pages.login("maya", "maya-password-1")
        shown = [pages.get(path) for path in ["/chat/", "/chat/new/", "/portfolio/", *account_paths]]
        shown += [pages.get(f"/chat/{s['id']}/") for s in sessions]
        assert any(text in page for text in example_user_texts() for page in shown)  # user data was on the pages
        # 5. The admin search by account id, and a log opened from the results.
        browser.admin_login("staff", "staff-password-1")
        for account_id in sorted(served):
            page = browser.get(f"/admin/chat/chatlog/?q={urllib.parse.quote(account_id)}")
            change = re.search(r'href="(/admin/chat/chatlog/[0-9a-f-]{36}/change/\?_changelist_filters=[^"]+)"', page)
            assert change, f"the search by {account_id} found no log"
            assert account_id in browser.get(change.group(1).replace("&amp;", "&"))
        outputs.append(server.output())

    output = "\n".join(outputs)
    assert "/admin/chat/chatlog/?…" in output  # the access log was on
    if debug:
        assert "django.template" in output  # the pages' template records were on, reduced to their message
    assert_no_user_data(output)


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
