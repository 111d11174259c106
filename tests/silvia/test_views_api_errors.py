"""Every error under /api/ is JSON (docs/api.md#errors, issue 20): a body over the limit, an unknown
path with any method, CSRF, a 500, the schema's 405. In process, and through uvicorn for the big body."""

from __future__ import annotations

import http.client
import json
import socket
import uuid

import pytest
from django.test import Client, RequestFactory
from django.test.utils import override_settings
from django.urls import path
from rest_framework.authtoken.models import Token

from silvia import urls as project_urls
from silvia.views import csrf_failure
from tests.live_support import ServerProcess

pytestmark = pytest.mark.django_db

METHODS = ["get", "head", "post", "put", "patch", "delete", "options"]
TURNS = "/api/chat/sessions/{}/turns/"


@pytest.fixture
def token(maya):
    return Token.objects.create(user=maya).key


def _json_error(response, status: int) -> dict:
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    return response.json()


def test_a_body_over_the_limit_is_a_json_413(token, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    body = json.dumps({"message": "x" * 2000})
    response = client.post(TURNS.format(uuid.uuid4()), body, content_type="application/json")
    assert _json_error(response, 413) == {"detail": "The request body is larger than 1000 bytes."}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("who", ["anonymous", "token", "session without CSRF token"])
def test_an_unknown_api_path_is_a_json_404_whatever_the_method(maya, token, method, who):
    client = Client(enforce_csrf_checks=True)
    headers = {"HTTP_AUTHORIZATION": f"Token {token}"} if who == "token" else {}
    if who.startswith("session"):
        client.force_login(maya)
    response = getattr(client, method)("/api/no/such/path", **headers)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    if method != "head":
        assert response.json() == {"detail": "Not found."}


def test_a_token_post_is_never_the_csrf_page_even_with_a_session_cookie(maya, token, recorded_model):
    from tests.live_support import script, step, text

    recorded_model.load([script(step(text("Hello.")))])
    client = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Token {token}")
    client.force_login(maya)  # a browser that also holds a session, and sends no CSRF token
    response = client.post(TURNS.format(uuid.uuid4()), {"message": "hi"}, content_type="application/json")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/event-stream")
    b"".join(response.streaming_content)  # type: ignore[attr-defined]


def test_a_session_post_without_csrf_token_is_a_json_403(maya):
    client = Client(enforce_csrf_checks=True)
    client.force_login(maya)
    response = client.post(TURNS.format(uuid.uuid4()), {"message": "hi"}, content_type="application/json")
    assert _json_error(response, 403) == {"detail": "CSRF Failed: CSRF cookie not set."}


def test_the_csrf_failure_view_is_json_under_api_only():
    api = csrf_failure(RequestFactory().post("/api/anything"), reason="CSRF cookie not set.")
    assert api.status_code == 403 and json.loads(api.content) == {"detail": "CSRF Failed: CSRF cookie not set."}
    page = csrf_failure(RequestFactory().post("/login/"), reason="CSRF cookie not set.")
    assert page.status_code == 403 and page["Content-Type"].startswith("text/html")


def _fail(request):
    raise RuntimeError("a bug")


# The project's URLs and handlers, plus two views that fail.
urlpatterns = [path("api/fail/", _fail), path("fail/", _fail), *project_urls.urlpatterns]
handler500 = project_urls.handler500


@override_settings(ROOT_URLCONF=__name__, DEBUG=False)
def test_a_500_under_api_is_json_and_elsewhere_a_page():
    client = Client(raise_request_exception=False)
    assert _json_error(client.get("/api/fail/"), 500) == {"detail": "Internal server error."}
    page = client.get("/fail/")
    assert page.status_code == 500 and page["Content-Type"].startswith("text/html")


def test_the_schemas_405_is_json(token):
    response = Client(HTTP_AUTHORIZATION=f"Token {token}").post("/api/schema/")
    assert _json_error(response, 405) == {"detail": 'Method "POST" not allowed.'}
    assert Client(HTTP_AUTHORIZATION=f"Token {token}").get("/api/schema/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_through_uvicorn_a_20_mb_or_endless_chunked_post_is_a_json_413_and_an_unknown_post_a_json_404(maya):
    token = Token.objects.create(user=maya).key
    server = ServerProcess({"ANTHROPIC_API_KEY": "test-key"})
    try:
        answers: dict[str, tuple[object, ...]] = {}
        body = json.dumps({"message": "x" * (20 * 1024 * 1024)}).encode()
        for name, (method, url, payload) in {
            "20 MB turn": ("POST", TURNS.format(uuid.uuid4()), body),
            "unknown path": ("POST", "/api/no/such/path", b"{}"),
            "unknown path, DELETE": ("DELETE", "/api/chat/sessions/x/y/z", None),
        }.items():
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
            conn.request(method, url, body=payload, headers=headers)
            response = conn.getresponse()
            answers[name] = (response.status, response.getheader("Content-Type"), json.loads(response.read()))
            conn.close()
        # Chunked (no Content-Length): a small body is parsed, and a big one refused while still being sent.
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        chunks = iter([b'{"message": ', b"12}"])
        conn.request("POST", TURNS.format(uuid.uuid4()), body=chunks, headers=headers, encode_chunked=True)
        response = conn.getresponse()
        answers["chunked"] = (response.status, response.getheader("Content-Type"), json.loads(response.read()))
        conn.close()
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            head = f"POST {TURNS.format(uuid.uuid4())} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
            sock.sendall(f"{head}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
            chunk = b"x" * (1024 * 1024)
            for _ in range(3):  # 3 MB and no last chunk: the client is still sending
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            reply = b""
            while b"\r\n\r\n" not in reply:
                reply += sock.recv(65536)
            head_bytes, _, body_bytes = reply.partition(b"\r\n\r\n")
            length = int(head_bytes.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            while len(body_bytes) < length:
                body_bytes += sock.recv(65536)
        answers["chunked, endless"] = (head_bytes.partition(b"\r\n")[0], json.loads(body_bytes))
    finally:
        server.stop()
    too_big = "The request body is larger than 2621440 bytes."  # Django's DATA_UPLOAD_MAX_MEMORY_SIZE
    assert answers == {
        "20 MB turn": (413, "application/json", {"detail": too_big}),
        "unknown path": (404, "application/json", {"detail": "Not found."}),
        "unknown path, DELETE": (404, "application/json", {"detail": "Not found."}),
        "chunked": (400, "application/json", {"message": ["Expected a string."]}),
        "chunked, endless": (b"HTTP/1.1 413 Request Entity Too Large", {"detail": too_big}),
    }
