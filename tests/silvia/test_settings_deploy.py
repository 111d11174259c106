"""Settings a deploy can get right, static files, /healthz and /readyz (issues 14 and 21; docs/deploying.md)."""

from __future__ import annotations

import gzip
import json
import os
import re
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path

import pytest
from django.test import Client

from tests.uvicorn_server import ROOT, subprocess_database_url, uvicorn_server


def _django(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run `code` after `django.setup()` in a fresh process with the production settings and `env`."""
    full_env = {**os.environ, "DJANGO_SETTINGS_MODULE": "silvia.settings", **env}
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        check=False,
    )


def deploying_production_env() -> dict[str, str]:
    """The `export` lines of docs/deploying.md "The environment"; a `$(…)` value becomes a fresh random key."""
    page = (ROOT / "docs" / "deploying.md").read_text(encoding="utf-8")
    section = page.split("\n## The environment\n", 1)[1].split("\n## ", 1)[0]
    env = {}
    for name, value in re.findall(r"^export (\w+)=(\S+)", section, flags=re.MULTILINE):
        env[name] = secrets.token_urlsafe(50) if value.startswith('"$(') else value
    return env


def test_the_secret_key_is_required_with_debug_off():
    # An explicit empty value: a developer's .env cannot fill it in (read_env never overwrites).
    result = _django("", {"DJANGO_SECRET_KEY": "", "DJANGO_DEBUG": "false"})
    assert result.returncode != 0
    assert (
        "ImproperlyConfigured: DJANGO_SECRET_KEY is not set: it is required when DJANGO_DEBUG is off" in result.stderr
    )


def test_debug_on_starts_without_a_key():
    result = _django(
        "from django.conf import settings; print(settings.DEBUG)", {"DJANGO_SECRET_KEY": "", "DJANGO_DEBUG": "true"}
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_a_malformed_proxy_ssl_header_is_refused():
    result = _django("", {"DJANGO_SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO"})
    assert result.returncode != 0
    assert "DJANGO_SECURE_PROXY_SSL_HEADER must be `HEADER,value`" in result.stderr


def test_a_missing_metrics_folder_stops_the_web_and_the_worker_not_a_command(tmp_path):
    # Started anyway, every request (/healthz too) was a 500: FileNotFoundError at the first figure,
    # DuplicateTimeseries after, both texts withheld from the log by the privacy filter.
    missing = tmp_path / "metrics"
    env = {"PROMETHEUS_MULTIPROC_DIR": str(missing)}
    for entry in ("import silvia.asgi", "import silvia.celery"):  # what uvicorn and the worker load
        result = _django(entry, env)
        assert result.returncode != 0, entry
        assert f"ImproperlyConfigured: PROMETHEUS_MULTIPROC_DIR={missing} is not a directory" in result.stderr
    # A release's commands run before the folder is made for the processes' start (docs/deploying.md).
    result = _django("from django.core.management import call_command; call_command('check')", env)
    assert result.returncode == 0, result.stderr
    missing.mkdir()
    result = _django("import silvia.asgi", env)
    assert result.returncode == 0, result.stderr


def test_the_documented_production_settings_clear_check_deploy():
    env = deploying_production_env()
    assert {
        "DJANGO_SECRET_KEY",
        "DJANGO_SECURE_SSL_REDIRECT",
        "DJANGO_SECURE_HSTS_SECONDS",
        "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "DJANGO_SECURE_HSTS_PRELOAD",
        "DJANGO_SESSION_COOKIE_SECURE",
        "DJANGO_CSRF_COOKIE_SECURE",
        "DJANGO_SECURE_PROXY_SSL_HEADER",
    } <= env.keys()
    # The database need not answer for the checks; keep the suite's.
    env.pop("DATABASE_URL")
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "silvia.settings", **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    settings = _django(
        "from django.conf import settings as s; "
        "print(s.SECURE_PROXY_SSL_HEADER, s.SECURE_HSTS_SECONDS, s.CSRF_TRUSTED_ORIGINS, s.ALLOWED_HOSTS)",
        env,
    )
    assert settings.stdout.strip() == (
        "('HTTP_X_FORWARDED_PROTO', 'https') 31536000 ['https://silvia.example.com'] ['silvia.example.com']"
    )


def test_without_the_documented_settings_check_deploy_warns():
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "silvia.settings"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    for warning in ("W004", "W008", "W012", "W016"):
        assert f"security.{warning}" in result.stderr


@pytest.mark.django_db
def test_healthz_is_ok_when_the_database_answers():
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.django_db
def test_healthz_refuses_writes():
    assert Client().post("/healthz").status_code == 405
    assert Client().post("/readyz").status_code == 405


@pytest.mark.django_db
def test_readyz_is_ok_when_every_check_passes():
    response = Client().get("/readyz")
    checks = {"database": "ok", "job_engine": "ok", "sql_tool": "ok"}  # the embedded broker: its folder is writable
    assert (response.status_code, response.json()) == (200, {"status": "ok", "checks": checks})
    assert "no-cache" in response["Cache-Control"]


def broker_down() -> None:
    """A readiness check whose part is unreachable (the job engine's check plugs in the same way)."""
    raise ConnectionRefusedError("amqp://guest:guest@10.0.0.9:5672 refused")


@pytest.mark.django_db
def test_a_readiness_check_plugs_in_through_settings(settings, caplog):
    settings.READINESS_CHECKS = {
        "database": "silvia.readiness.database",
        "broker": "tests.silvia.test_settings_deploy.broker_down",
    }
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "checks": {"database": "ok", "broker": "unavailable"}}
    assert "readyz: broker unavailable (ConnectionRefusedError)" in caplog.text
    assert "10.0.0.9" not in caplog.text + response.content.decode()


@pytest.mark.django_db
def test_readyz_names_the_job_engine_when_its_broker_is_down(settings, caplog):
    settings.CELERY_BROKER_EMBEDDED = False
    settings.CELERY_BROKER_URL = "amqp://guest:guest@127.0.0.1:1//"  # nothing listens on port 1
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": "ok", "job_engine": "unavailable", "sql_tool": "ok"},
    }
    assert "readyz: job_engine unavailable (ConnectionRefusedError)" in caplog.text


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Message, bytes]:
    """A GET's status, headers (looked up in any case, as HTTP's names are: httptools under uvicorn sends
    some in lower case) and body."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


@pytest.mark.django_db(transaction=True)
def test_uvicorn_serves_admin_css_and_healthz_with_debug_off(tmp_path, collected_static):
    env = {
        "DATABASE_URL": subprocess_database_url(tmp_path),
        "DJANGO_STATIC_ROOT": str(collected_static),
        "DJANGO_DEBUG": "false",
    }
    with uvicorn_server(tmp_path / "server.log", env) as server:
        status, _, page = _get(f"{server.url}/admin/login/")
        assert status == 200
        css = re.search(rb'href="(/static/admin/css/base\.[0-9a-f]{12}\.css)"', page)
        assert css, page[:2000]
        status, headers, body = _get(server.url + css.group(1).decode(), {"Accept-Encoding": "gzip"})
        assert status == 200
        assert headers["Content-Type"].startswith("text/css")
        assert headers["Content-Encoding"] == "gzip"
        assert "immutable" in headers["Cache-Control"]
        assert gzip.decompress(body) == (collected_static / css.group(1).decode().removeprefix("/static/")).read_bytes()
        for _ in range(3):
            status, _, body = _get(f"{server.url}/healthz")
            assert (status, json.loads(body)) == (200, {"status": "ok"})
            status, _, body = _get(f"{server.url}/readyz")
            checks = {"database": "ok", "job_engine": "ok", "sql_tool": "ok"}
            assert (status, json.loads(body)) == (200, {"status": "ok", "checks": checks})
        status, _, _ = _get(f"{server.url}/admin/login/?next=/admin/")
        output = server.output()
    assert "/healthz" not in output and "/readyz" not in output  # a healthy probe is not logged
    assert '"GET /admin/login/?… HTTP/1.1" 200' in output  # the access log is on, without the query


def test_uvicorn_readyz_is_503_when_the_database_is_down_and_healthz_is_ok(tmp_path, collected_static):
    # Nothing listens on port 1: the connection is refused at once.
    env = {
        "DATABASE_URL": "postgres://postgres@127.0.0.1:1/nothing",
        "DATABASE_POOL_TIMEOUT": "1",
        "DJANGO_STATIC_ROOT": str(collected_static),
    }
    with uvicorn_server(tmp_path / "server.log", env) as server:
        alive, _, alive_body = _get(f"{server.url}/healthz")
        status, _, body = _get(f"{server.url}/readyz")
        output = server.output()
    assert (alive, json.loads(alive_body)) == (200, {"status": "ok"})  # the process is alive: no restart
    checks = {"database": "unavailable", "job_engine": "ok", "sql_tool": "unavailable"}  # it asks the database too
    assert (status, json.loads(body)) == (503, {"status": "unavailable", "checks": checks})
    assert "readyz: database unavailable (DatabaseUnavailable)" in output
    assert '"GET /readyz HTTP/1.1" 503' in output
    # The cause is said once, when the process starts (docs/deploying.md#start-up-errors); never by a probe.
    start_up = "DatabaseUnavailable: DATABASE_URL postgres://postgres@127.0.0.1:1/nothing: Connection refused"
    assert output.count(start_up) == 1 and output.lower().count("refused") == 1


def test_static_root_is_settable(tmp_path):
    result = _django(
        "from django.conf import settings; print(settings.STATIC_ROOT)", {"DJANGO_STATIC_ROOT": str(tmp_path)}
    )
    assert Path(result.stdout.strip()) == tmp_path
