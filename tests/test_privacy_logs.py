"""No account id of the examples reaches any log output, with DEBUG logging on (docs/privacy.md, issue 14 item 1).

Two runs: an operator's run (real `manage.py import_turns` and uvicorn
processes, all their output read) and the same steps in the test process
(every handler's output captured at the file-descriptor level).
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
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.uvicorn_server import ROOT, subprocess_database_url, uvicorn_server

EXAMPLES = ROOT / "examples" / "turns"
_ID_KEYS = "source_account_id|snaptrade_account_id|manual_account_uuid|account_uuid|account_id|accountId"


def example_account_ids() -> set[str]:
    """Every account id in examples/turns (the id columns of docs/accounts.md and `accountId` of targets)."""
    ids: set[str] = set()
    for path in EXAMPLES.glob("*.json"):
        ids |= set(re.findall(rf'"(?:{_ID_KEYS})":\s*"([^"]+)"', path.read_text(encoding="utf-8")))
    return ids


def assert_no_account_id(output: str) -> None:
    """Fail naming the first account id found in `output`, and where."""
    for account_id in sorted(example_account_ids()):
        at = output.find(account_id)
        assert at < 0, f"account id {account_id} logged: …{output[max(0, at - 200) : at + 80]}…"
    assert '"accountId"' not in output  # nor a target's JSON


def test_the_examples_hold_account_ids():
    assert len(example_account_ids()) == 11


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

    def admin_login(self, username: str, password: str) -> None:
        page = self.get("/admin/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert csrf
        landing = self.post_form(
            "/admin/login/?next=/admin/",
            {"csrfmiddlewaretoken": csrf.group(1), "username": username, "password": password, "next": "/admin/"},
        )
        assert "Log out" in landing or "logout" in landing


def _debug_env(database_url: str, static_root: Path) -> dict[str, str]:
    # What an operator sets to see everything: DEBUG on (so Django logs SQL) and DEBUG level.
    return {
        "DATABASE_URL": database_url,
        "DJANGO_DEBUG": "true",
        "DJANGO_LOG_LEVEL": "DEBUG",
        "DJANGO_STATIC_ROOT": str(static_root),
        "DJANGO_SETTINGS_MODULE": "silvia.settings",
    }


@pytest.mark.django_db(transaction=True)
def test_operator_run_with_debug_logging_logs_no_account_id(tmp_path, collected_static):
    maya = User.objects.create_user(username="maya")
    token = Token.objects.create(user=maya).key
    User.objects.create_superuser("staff", password="staff-password-1")
    env = {**os.environ, **_debug_env(subprocess_database_url(tmp_path), collected_static)}

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
    assert 'INSERT INTO "ai_chat_logs"' in imported.stderr  # SQL debug logging was on

    with uvicorn_server(tmp_path / "server.log", env) as server:
        browser = Browser(server.url)
        # 2. The API: every session of maya's, with her token.
        auth = {"Authorization": f"Token {token}"}
        sessions = json.loads(browser.get("/api/chat/sessions/", auth))["results"]
        assert len(sessions) == 4
        bodies = [browser.get(f"/api/chat/sessions/{s['id']}/", auth) for s in sessions]
        served = {a for a in example_account_ids() if any(a in body for body in bodies)}
        assert len(served) >= 5  # ids that were stored and shown, so that they could have leaked
        # 3. The admin search by account id, and a log opened from the results.
        browser.admin_login("staff", "staff-password-1")
        for account_id in sorted(served):
            page = browser.get(f"/admin/chat/chatlog/?q={urllib.parse.quote(account_id)}")
            change = re.search(r'href="(/admin/chat/chatlog/[0-9a-f-]{36}/change/\?_changelist_filters=[^"]+)"', page)
            assert change, f"the search by {account_id} found no log"
            assert account_id in browser.get(change.group(1).replace("&amp;", "&"))
        outputs.append(server.output())

    output = "\n".join(outputs)
    assert "/admin/chat/chatlog/?…" in output  # the access log was on
    assert_no_account_id(output)


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
    assert "(message withheld: it may quote row data)" in output
    assert "Logging error" not in output
    assert_no_account_id(output)


def _integrity_error_quoting(value: str):
    from django.db import IntegrityError

    try:
        raise IntegrityError(f"Failing row contains ({value})")
    except IntegrityError:
        return sys.exc_info()
