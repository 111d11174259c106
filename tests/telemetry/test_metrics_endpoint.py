"""/metrics: Prometheus, not public, multi-process aware (issue 21, item 5; docs/metrics.md): not served without
a token configured, refused without the token, answered with it; the probes answer another method 405; a
scrape of a two-worker uvicorn adds up an import run in its own process (one shared directory, so the
figures are absolute)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.factories import UserFactory
from tests.telemetry.metrics_support import EXAMPLES, ROOT, TOKEN, _samples
from tests.uvicorn_server import subprocess_database_url, uvicorn_server

# --- the endpoint ----------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_metrics_is_not_served_without_a_token_configured(settings):
    settings.METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 404
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/metrics", "/readyz", "/healthz"])
def test_the_probes_answer_another_method_405_not_the_csrf_page(settings, path):
    settings.METRICS_TOKEN = TOKEN
    response = Client(enforce_csrf_checks=True).post(path, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer wrong-token", f"Token {TOKEN}", f"Basic {TOKEN}", f"Bearer {TOKEN}x"],
)
def test_metrics_refuses_without_the_token(settings, authorization):
    settings.METRICS_TOKEN = TOKEN
    headers = {} if authorization is None else {"HTTP_AUTHORIZATION": authorization}
    response = Client().get("/metrics", **headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert b"silvia_" not in response.content


@pytest.mark.django_db
def test_metrics_answers_with_the_token(settings):
    settings.METRICS_TOKEN = TOKEN
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    names = {family.name for family in text_string_to_metric_families(response.content.decode())}
    assert {
        "silvia_turns_finished",
        "silvia_turn_first_text_seconds",
        "silvia_model_request_seconds",
        "silvia_tool_calls",
        "silvia_sse_streams_open",
        "silvia_imported_turns",
        "silvia_live_turns",
        "silvia_live_turn_queue_depth",
    } <= names


# --- several processes ------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_scrape_adds_up_every_process_of_the_host(tmp_path):
    """An import in its own process, a scrape of a uvicorn process: multiprocess mode, one shared directory."""
    UserFactory.create(username="maya")
    UserFactory.create(username="sam")
    shared = tmp_path / "metrics"
    shared.mkdir()
    env = {
        "DATABASE_URL": subprocess_database_url(tmp_path),
        "PROMETHEUS_MULTIPROC_DIR": str(shared),
        "METRICS_TOKEN": TOKEN,
    }
    imported = subprocess.run(
        [sys.executable, "manage.py", "import_turns", str(EXAMPLES / "01-card-balances.json")],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "silvia.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr
    expected = len(json.loads((EXAMPLES / "01-card-balances.json").read_text()))
    with uvicorn_server(tmp_path / "server.log", env, ["--workers", "2"]) as server:
        request = urllib.request.Request(f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            samples = _samples(response.read().decode())
        refused = urllib.request.Request(f"{server.url}/metrics")
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(refused, timeout=30)
        assert answer.value.code == 401
    assert samples[("silvia_imported_turns_total", (("outcome", "imported"),))] == expected == 3
    assert samples[("silvia_live_turns", (("state", "running"),))] == 0
