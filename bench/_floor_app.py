"""The same-work floor as an ASGI app, served by uvicorn like the product.

Raw psycopg on one kept connection, orjson, no Django. It does what any
implementation of the two endpoints must do: look the token up, then

- `/detail/<session id>`: the session row, then its messages oldest first
  with `citations`/`inline_citations` read as text and spliced into the body
  (`orjson.Fragment`, no decoding);
- `/etag/<session id>`: one indexed query for the ETag's inputs (the
  session row, its turns' count and latest `created_at`), hashed as the
  product hashes them, then `304` when `If-None-Match` holds it (else the
  ETag alone with 200 and no body): the least a 304 costs;
- `/list?page=N`: the count of the caller's sessions and, when the page is
  not past the end, one page of 50 from `chat_sessions` alone,
  `message_count` by a subquery run for the page's rows only.

The database is `FLOOR_DATABASE` (a psycopg conninfo).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any
from urllib.parse import parse_qs

import orjson
import psycopg
from psycopg.types.string import TextLoader

_connection: psycopg.Connection[Any] | None = None


def _db() -> psycopg.Connection[Any]:
    global _connection
    if _connection is None:
        _connection = psycopg.connect(os.environ["FLOOR_DATABASE"], autocommit=True, options="-c TimeZone=UTC")
        _connection.adapters.register_loader("jsonb", TextLoader)
    return _connection


def _user(headers: list[tuple[bytes, bytes]]) -> int | None:
    key = next((v for k, v in headers if k == b"authorization"), b"").decode().removeprefix("Token ")
    row = _db().execute("SELECT user_id FROM authtoken_token WHERE key = %s", [key]).fetchone()
    return None if row is None else row[0]


def _detail(user_id: int, session_id: str) -> bytes:
    db = _db()
    header = db.execute(
        "SELECT id, title, created_at, updated_at FROM chat_sessions WHERE id = %s AND user_id = %s",
        [session_id, user_id],
    ).fetchone()
    rows = db.execute(
        "SELECT id, user_message, response, citations, inline_citations, prompt_version, model, created_at "
        "FROM ai_chat_logs WHERE session_id = %s ORDER BY created_at, id",
        [session_id],
    ).fetchall()
    messages = [
        {
            "id": r[0],
            "user_message": r[1],
            "response": r[2],
            "citations": orjson.Fragment(r[3]),
            "inline_citations": orjson.Fragment(r[4]),
            "prompt_version": r[5],
            "model": r[6],
            "created_at": r[7],
        }
        for r in rows
    ]
    assert header is not None
    body = {"id": header[0], "title": header[1], "created_at": header[2], "updated_at": header[3], "messages": messages}
    return orjson.dumps(body, option=orjson.OPT_UTC_Z)


def _etag(user_id: int, session_id: str) -> str | None:
    """The product's ETag for the session (`chat.api.rendering.session_detail_etag` with no `after`, UTC)."""
    row = (
        _db()
        .execute(
            "SELECT s.id, s.title, s.created_at, s.updated_at, "
            "(SELECT count(*) FROM ai_chat_logs l WHERE l.session_id = s.id), "
            "(SELECT max(created_at) FROM ai_chat_logs l WHERE l.session_id = s.id) "
            "FROM chat_sessions s WHERE s.id = %s AND s.user_id = %s",
            [session_id, user_id],
        )
        .fetchone()
    )
    if row is None:
        return None
    parts = (row[0], row[1], row[2].isoformat(), row[3].isoformat(), row[4], row[5], None, "UTC", "")
    return '"' + hashlib.sha256(repr(parts).encode()).hexdigest()[:32] + '"'


def _list(user_id: int, page: int) -> bytes:
    db = _db()
    (count,) = db.execute("SELECT count(*) FROM chat_sessions WHERE user_id = %s", [user_id]).fetchone() or (0,)
    offset = (page - 1) * 50
    rows = (
        []
        if offset >= count
        else db.execute(
            "SELECT p.id, p.title, p.created_at, p.updated_at, "
            "(SELECT count(*) FROM ai_chat_logs l WHERE l.session_id = p.id) "
            "FROM (SELECT id, title, created_at, updated_at FROM chat_sessions WHERE user_id = %s "
            "ORDER BY updated_at DESC, created_at DESC, id DESC LIMIT 50 OFFSET %s) p "
            "ORDER BY p.updated_at DESC, p.created_at DESC, p.id DESC",
            [user_id, offset],
        ).fetchall()
    )
    base = "http://127.0.0.1/api/chat/sessions/"
    body = {
        "count": count,
        "next": f"{base}?page={page + 1}" if page * 50 < count else None,
        "previous": None if page == 1 else (base if page == 2 else f"{base}?page={page - 1}"),
        "results": [
            {"id": r[0], "title": r[1], "created_at": r[2], "updated_at": r[3], "message_count": r[4]} for r in rows
        ],
    }
    return orjson.dumps(body, option=orjson.OPT_UTC_Z)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """ASGI entry point (HTTP only)."""
    if scope["type"] != "http":
        return
    user_id = _user(scope["headers"])
    path = scope["path"]
    if user_id is None:
        status, body = 401, b'{"detail":"Invalid token."}'
    elif path.startswith("/detail/"):
        status, body = 200, _detail(user_id, path.removeprefix("/detail/"))
    elif path.startswith("/etag/"):
        etag = _etag(user_id, path.removeprefix("/etag/"))
        sent = next((v for k, v in scope["headers"] if k == b"if-none-match"), b"").decode()
        status, body = (304 if etag is not None and sent == etag else 200), b""
        headers = [(b"etag", (etag or "").encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    elif path == "/list":
        page = int(parse_qs(scope["query_string"].decode()).get("page", ["1"])[0])
        status, body = 200, _list(user_id, page)
    else:
        status, body = 404, b'{"detail":"Not found."}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
