"""`silvia.asgi`: Django's stock ASGI handler inside `BodyLimit` (docs/api.md#errors, docs/deploying.md)."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.core.handlers.asgi import ASGIHandler

from live.slots import GiveBackSlots
from silvia.asgi import BodyLimit, application, django_application

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = "/api/chat/sessions/3f0e8b0c-2d5c-4a57-9a51-0d6c5e2b9a11/turns/"


def _request(
    method: str,
    path: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    chunks: list[bytes] | None = None,
    *,
    body_ends: bool = True,
    timeout: float = 20,
) -> tuple[int, dict[bytes, bytes], bytes]:
    """One request through `application` in process: the body in `chunks` (one `http.request` message each,
    the last one ending the body unless `body_ends` is false: a client still sending). Returns (status,
    headers, body); raises TimeoutError when no answer comes in `timeout` seconds."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *(headers or [])], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
    }  # fmt: skip
    parts = chunks or [b""]
    messages = [
        {"type": "http.request", "body": part, "more_body": not body_ends or index < len(parts) - 1}
        for index, part in enumerate(parts)
    ]
    sent: list[dict] = []

    async def receive() -> dict:
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(application(scope, receive, send), timeout))
    return sent[0]["status"], dict(sent[0]["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


def _token_headers(token_client) -> list[tuple[bytes, bytes]]:
    token = token_client._credentials["HTTP_AUTHORIZATION"].encode()
    return [(b"authorization", token), (b"content-type", b"application/json")]


def test_the_application_is_djangos_stock_handler_inside_the_body_limit():
    assert type(django_application) is ASGIHandler
    assert isinstance(application, BodyLimit) and isinstance(application.app, GiveBackSlots)
    assert application.app.app is django_application


def test_the_api_answers_through_it(token_client):
    status, _, body = _request("GET", "/api/chat/sessions/", _token_headers(token_client))
    assert (status, body) == (200, b'{"count":0,"next":null,"previous":null,"results":[]}')
    assert _request("GET", "/api/chat/sessions/")[0] == 401


def test_a_body_without_content_length_is_parsed(token_client):
    # A chunked body (no Content-Length) would reach DRF as no body at all: "message: This field is required."
    chunks = [b'{"mess', b'age": 12}']
    status, _, body = _request("POST", TURNS, _token_headers(token_client), chunks)
    assert (status, json.loads(body)) == (400, {"message": ["Expected a string."]})


def test_a_body_past_the_limit_is_a_413_before_it_ends(token_client, settings, monkeypatch):
    # The client is still sending (no last chunk): the body is refused at the limit, not spooled to its end.
    monkeypatch.setattr(application, "limit", 1000)
    chunks = [b'{"message": "', b"x" * 600, b"x" * 600]
    status, headers, body = _request("POST", TURNS, _token_headers(token_client), chunks, body_ends=False, timeout=10)
    assert (status, headers[b"content-type"]) == (413, b"application/json")
    assert json.loads(body) == {"detail": "The request body is larger than 1000 bytes."}


def test_a_declared_length_past_the_limit_is_a_413_unread(token_client, monkeypatch):
    monkeypatch.setattr(application, "limit", 1000)
    headers = [*_token_headers(token_client), (b"content-length", b"5000")]
    status, _, body = _request("POST", TURNS, headers, [b"x" * 10], body_ends=False, timeout=10)
    assert (status, json.loads(body)) == (413, {"detail": "The request body is larger than 1000 bytes."})


def test_a_body_past_the_limit_elsewhere_is_a_plain_413(monkeypatch):
    monkeypatch.setattr(application, "limit", 1000)
    form = [(b"content-type", b"application/x-www-form-urlencoded")]
    status, headers, body = _request("POST", "/login/", form, [b"u=" + b"x" * 2000], body_ends=False, timeout=10)
    assert (status, headers[b"content-type"], body) == (
        413,
        b"text/plain; charset=utf-8",
        b"The request body is larger than 1000 bytes.\n",
    )


def test_a_body_at_the_limit_is_read(token_client, monkeypatch):
    body = json.dumps({"message": 12}).encode()
    monkeypatch.setattr(application, "limit", len(body))
    status, _, answer = _request("POST", TURNS, _token_headers(token_client), [body[:5], body[5:]])
    assert (status, json.loads(answer)) == (400, {"message": ["Expected a string."]})


def test_the_limit_is_djangos_setting():
    from django.conf import settings

    assert application.limit == settings.DATA_UPLOAD_MAX_MEMORY_SIZE
