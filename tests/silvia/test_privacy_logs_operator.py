"""No user data reaches any log output of an operator's run, at DEBUG level, with `DJANGO_DEBUG` false and true
(docs/privacy.md): real `manage.py import_turns` and uvicorn processes, all their output read: the import,
the API, every page, a live turn whose tool input is not JSON, and the admin search by account id."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from tests.live_support import parse_sse, step, text
from tests.silvia.privacy_support import (
    EXAMPLES,
    assert_no_user_data,
    bad_tool_input_step,
    example_account_ids,
    example_user_texts,
    maya_account_paths,
    seed_pages_data,
)
from tests.uvicorn_server import ROOT, subprocess_database_url, uvicorn_server


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
