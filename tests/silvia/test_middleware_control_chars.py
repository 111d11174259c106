"""Control characters from a stranger are a 400/401/404, never a 500 (issue 14, item 2).

Over the Django test client on the suite's database (SQLite, or PostgreSQL
where a NUL in a query parameter is a database error), and over a real uvicorn
process for the cases the issue reported.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.uvicorn_server import raw_request, subprocess_database_url, uvicorn_server

CONTROLS = ["\x00", "\x01", "\x0a", "\x0d", "\x1b", "\x7f"]


@dataclass(frozen=True)
class Place:
    """Where a control character `c` is put, and the status that answers it."""

    name: str
    send: Callable[[Client, str], object]
    status: int


def _cookie(name: str, url: str) -> Callable[[Client, str], object]:
    # The quoted, octal-escaped form a cookie parser decodes: `sessionid="abc\000def…"`,
    # long enough (8+ characters) for Django to look the session key up.
    return lambda client, c: client.get(url, HTTP_COOKIE=f'{name}="abc\\{ord(c):03o}def0123456789abcdef"')


PLACES = [
    Place("path under /api/", lambda client, c: client.get(f"/api/chat/sessions/{quote(c)}/"), 404),
    Place("path of the admin", lambda client, c: client.get(f"/admin/chat/chatlog/{quote(c)}/change/"), 404),
    Place("path of healthz", lambda client, c: client.get(f"/healthz{quote(c)}"), 404),
    Place("query value, API", lambda client, c: client.get(f"/api/chat/sessions/?page=1{quote(c)}"), 400),
    Place("query key, API", lambda client, c: client.get(f"/api/chat/sessions/?a{quote(c)}=1"), 400),
    Place("query, admin search", lambda client, c: client.get(f"/admin/chat/chatlog/?q=x{quote(c)}y"), 400),
    Place("query, admin login next", lambda client, c: client.get(f"/admin/login/?next=/admin/{quote(c)}"), 400),
    Place("header User-Agent", lambda client, c: client.get("/api/chat/sessions/", HTTP_USER_AGENT=f"a{c}b"), 400),
    Place("header X-Forwarded-For", lambda client, c: client.get("/healthz", HTTP_X_FORWARDED_FOR=f"1.2.3.4{c}"), 400),
    Place(
        "header Authorization",
        lambda client, c: client.get("/api/chat/sessions/", HTTP_AUTHORIZATION=f"Token a{c}b"),
        401,
    ),
    Place("cookie sessionid, API", _cookie("sessionid", "/api/chat/sessions/"), 401),
    Place("cookie sessionid, admin", _cookie("sessionid", "/admin/"), 302),
    Place("cookie csrftoken, admin login", _cookie("csrftoken", "/admin/login/"), 200),
    Place("cookie name", lambda client, c: client.get("/api/chat/sessions/", HTTP_COOKIE=f"a{c}b=1"), 401),
]


@pytest.mark.django_db
@pytest.mark.parametrize("c", CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
@pytest.mark.parametrize("place", PLACES, ids=lambda p: p.name)
def test_control_character_is_not_a_500(place, c):
    response = place.send(Client(raise_request_exception=False), c)
    assert response.status_code == place.status
    if response.status_code in (400, 404) and response.wsgi_request.path.startswith("/api/"):
        assert "detail" in json.loads(response.content)


@pytest.mark.django_db
def test_a_bad_cookie_is_dropped_and_the_token_still_works():
    user = User.objects.create_user(username="maya")
    token = Token.objects.create(user=user)
    response = Client().get(
        "/api/chat/sessions/",
        HTTP_AUTHORIZATION=f"Token {token.key}",
        HTTP_COOKIE='sessionid="abc\\000def0123456789abcdef"',
    )
    assert response.status_code == 200
    assert response.json()["count"] == 0


@pytest.mark.django_db
def test_a_tab_in_a_header_value_is_legal():
    assert Client().get("/healthz", HTTP_USER_AGENT="a\tb").status_code == 200


def test_messages_name_the_place():
    response = Client().get("/healthz", HTTP_X_FORWARDED_FOR="1\x002")
    assert response.content == b"The X-Forwarded-For header holds a control character."


# Over a real server: what the issue reported, byte for byte.
RAW_CASES = [
    (b'GET /api/chat/sessions/ HTTP/1.1\r\nCookie: sessionid="abc\\000def"\r\n', {401}),
    (b'GET /api/chat/sessions/ HTTP/1.1\r\nCookie: sessionid="abc\\000def0123456789abcdef"\r\n', {401}),
    (b'GET /admin/ HTTP/1.1\r\nCookie: sessionid="abc\\000def0123456789abcdef"\r\n', {302}),
    (b'GET /admin/ HTTP/1.1\r\nCookie: sessionid="abc\\000def"\r\n', {302}),
    (b"GET /api/chat/sessions/%00/ HTTP/1.1\r\n", {404}),
    (b"GET /admin/chat/chatlog/%00/change/ HTTP/1.1\r\n", {404}),
    (b"GET /api/chat/sessions/?page=%00 HTTP/1.1\r\n", {400}),
    (b"GET /admin/chat/chatlog/?q=%01 HTTP/1.1\r\n", {400}),
    # Raw control bytes in a header: uvicorn's HTTP parser refuses them before Django.
    (b"GET /api/chat/sessions/ HTTP/1.1\r\nAuthorization: Token a\x01b\r\n", {400, 401}),
    (b"GET /api/chat/sessions/ HTTP/1.1\r\nCookie: sessionid=a\x00b\r\n", {400, 401}),
]


@pytest.mark.django_db(transaction=True)
def test_control_characters_over_a_real_server(tmp_path, collected_static):
    env = {"DATABASE_URL": subprocess_database_url(tmp_path), "DJANGO_STATIC_ROOT": str(collected_static)}
    with uvicorn_server(tmp_path / "server.log", env) as server:
        for head, statuses in RAW_CASES:
            status, response = raw_request(server.url, head + b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert status in statuses, (head, response[:300])
        output = server.output()
    assert "Traceback" not in output
    assert "Internal Server Error" not in output
