"""Thin page views: a selector, a presenter, a template (docs/pages.md)."""

from __future__ import annotations

import json
import select
import socket
import uuid
from typing import Any, cast
from urllib.parse import quote

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.http import require_GET, require_POST

from chat.models import ChatLog
from chat.selectors import session_get_for_user, session_messages
from citations.urls import account_path
from finance.selectors import account_get_for_user, account_target_id, portfolio_for_user
from live.configured import model_configured
from live.erasure import session_delete as session_delete_everything
from live.models import LiveTurn
from pages.selectors import account_names_for_user, session_page_for_user, turn_get_for_user

SESSIONS_PER_PAGE = 50
"""The API's page size (docs/api.md), so both list the same sessions per page."""

TURNS_PER_PAGE = 50
"""Turns on one session page; a long session opens on its latest turns, `?page=N` goes back."""

PREVIEW_MAX_CHARS = 262_144
"""The longest answer `/chat/answer-preview/` takes (a model's longest answer is 64K tokens, about
this many characters). Past `pages.markdown.ANSWER_MARKDOWN_MAX_CHARS` it renders as plain text,
so no preview asks for seconds of rendering (docs/pages.md#bounds)."""

PREVIEW_MAX_CITATIONS = 10_000
"""The most inline citations `/chat/answer-preview/` takes (it shows the first
`pages.markdown.ANSWER_MAX_CITATIONS` as chips, as the page does)."""

CLIENT_LEFT = 499
"""The status of a request whose client left before its answer was rendered (nginx's "client closed
request"): logged, never sent."""
CLIENT_LEFT_REASON = "Client Closed Request"


def client_left(request: HttpRequest) -> bool:
    """Whether the client closed its connection while the request waited or worked (docs/pages.md#bounds).

    Under gunicorn (WSGI) a look at the request's socket (`environ["gunicorn.socket"]`): a client that
    closed it has sent its FIN, so the socket reads as ready with no bytes; bytes (a next request) or
    nothing to read mean it is still there. Elsewhere (the test client, ASGI) False: under ASGI Django
    ends the response itself when the client disconnects, after the view's bounded work.
    """
    sock = request.META.get("gunicorn.socket")
    if not isinstance(sock, socket.socket):
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)  # never waits (a cooperative select under gevent too)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except ValueError:  # TLS cannot peek
        return False
    except OSError:  # reset by the peer
        return True


def home(request: HttpRequest) -> HttpResponse:
    """`/`: the sessions page for a signed-in user, the sign-in page otherwise."""
    return redirect("pages:session-list" if request.user.is_authenticated else "login")


def _caller(request: HttpRequest) -> AbstractBaseUser:
    # Every view below is `login_required`, so the user is a real one.
    return cast(AbstractBaseUser, request.user)


def _ask_context() -> dict[str, Any]:
    return {"model_configured": model_configured()}


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    """`/chat/`: the caller's sessions, most recently active first, 50 a page (`?page=N`)."""
    page = session_page_for_user(user=_caller(request), number=request.GET.get("page"), per_page=SESSIONS_PER_PAGE)
    return render(request, "pages/session_list.html", {"page": page})


@login_required
def session_detail(request: HttpRequest, session_id: str) -> HttpResponse:
    """`/chat/<session id>/`: each turn with chips on its cited spans; 404 unless the caller's."""
    session = session_get_for_user(session_id=session_id, user=_caller(request))
    if session is None:
        raise Http404("No such conversation.")
    names = account_names_for_user(user=_caller(request))
    # Paged newest first, so page 1 holds the latest turns (the page a
    # conversation is continued from); each page reads oldest first.
    page = Paginator(session_messages(session=session).reverse(), TURNS_PER_PAGE).get_page(request.GET.get("page"))
    turns = []
    for log in reversed(page.object_list):
        if client_left(request):  # each answer's render is bounded; a page of 50 stops between them
            return HttpResponse(status=CLIENT_LEFT, reason=CLIENT_LEFT_REASON)
        turns.append(_turn(log, names))
    context = {
        "session": session,
        "session_id": session.id,
        "turns": turns,
        "page": page,
        "nav": "chat",
        **_ask_context(),
    }
    return render(request, "pages/session_detail.html", context)


@login_required
def session_delete(request: HttpRequest, session_id: str) -> HttpResponse:
    """`/chat/<session id>/delete/`: GET asks to confirm; POST (with its CSRF token) deletes the conversation and
    everything of it, a running answer stopped first (`live.erasure.session_delete`), then goes to `/chat/`.
    404 unless the caller's."""
    session = session_get_for_user(session_id=session_id, user=_caller(request))
    if session is None:
        raise Http404("No such conversation.")
    if request.method == "POST":
        session_delete_everything(user=_caller(request), session_id=session.id)
        messages.success(request, f"Deleted “{session.title or 'Untitled conversation'}”.")
        return redirect("pages:session-list")
    context = {
        "session": session,
        "question_count": session_messages(session=session).count(),
        "running": LiveTurn.objects.filter(session_id=session.id, user_id=session.user_id).active().exists(),
        "nav": "chat",
    }
    return render(request, "pages/session_delete.html", context)


def _render_answer(answer: str, inline: object, names: dict[str, str], *, partial: bool = False) -> Any:
    # Imported here: markdown-it-py and nh3 load with the first answer a page shows, not at
    # start-up (`manage.py check`, a worker's boot: tests/silvia/test_startup.py).
    from pages.markdown import render_answer

    return render_answer(answer, inline, account_names=names, partial=partial)


def _turn(log: ChatLog, names: dict[str, str]) -> dict[str, Any]:
    """The context of `pages/_turn.html` for one stored turn."""
    answer = _render_answer(log.response, log.inline_citations, names)
    return {"log": log, "answer": answer, "chip_prefix": f"chip-{log.id}"}


@require_GET
@login_required
def turn_detail(request: HttpRequest, session_id: str, log_id: str) -> HttpResponse:
    """`/chat/<session id>/turns/<log id>/`: one turn's `<article>`, as its session page shows it.

    What a live turn puts in the page once it is saved, so the page then
    equals a reload. 404 unless the turn is in the caller's session.
    """
    log = turn_get_for_user(session_id=session_id, log_id=log_id, user=_caller(request))
    if log is None:
        raise Http404("No such turn.")
    names = account_names_for_user(user=_caller(request))
    response = render(request, "pages/_turn.html", {"turn": _turn(log, names)})
    # A page that was untitled (its first turn) takes the session's title from here (ask.js), percent-encoded.
    response["X-Session-Title"] = quote(log.session.title or "", safe="")
    return response


def _preview_input(body: bytes) -> tuple[str, list[Any]]:
    """`answer` and `inline_citations` of a preview request body; ValueError naming what is wrong."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"body: not JSON ({error})") from None
    except RecursionError:
        raise ValueError("body: nested too deep") from None
    try:  # a "\ud800" escape decodes to a lone surrogate, which no page can encode
        json.dumps(data, ensure_ascii=False).encode()
    except UnicodeEncodeError as error:
        raise ValueError(f"body: a string holds a lone surrogate (U+{ord(error.object[error.start]):04X})") from None
    if not isinstance(data, dict):
        raise ValueError("body: expected an object")
    answer, inline = data.get("answer"), data.get("inline_citations", [])
    if not isinstance(answer, str):
        raise ValueError("answer: expected a string")
    if len(answer) > PREVIEW_MAX_CHARS:
        raise ValueError(f"answer: longer than {PREVIEW_MAX_CHARS} characters")
    if not isinstance(inline, list):
        raise ValueError("inline_citations: expected a list")
    if len(inline) > PREVIEW_MAX_CITATIONS:
        raise ValueError(f"inline_citations: more than {PREVIEW_MAX_CITATIONS}")
    return answer, inline


@require_POST
@login_required
def answer_preview(request: HttpRequest) -> HttpResponse:
    """`POST /chat/answer-preview/` `{"answer", "inline_citations"}`: a streaming answer as it may show now.

    The page posts what a live turn has sent so far and puts the HTML in
    place (docs/pages.md#streaming): the same renderer as the saved answer,
    in its partial mode. Only the caller's account names are used. 400 with
    `{"detail"}` for a body that is not that shape.
    """
    try:
        answer, inline = _preview_input(request.body)
    except ValueError as error:
        return JsonResponse({"detail": str(error)}, status=400)
    names = account_names_for_user(user=_caller(request))
    if client_left(request):  # its tab closed while the request waited for a thread
        return HttpResponse(status=CLIENT_LEFT, reason=CLIENT_LEFT_REASON)
    rendered = _render_answer(answer, inline, names, partial=True)
    return render(request, "pages/_answer_preview.html", {"answer": rendered})


def favicon(request: HttpRequest) -> HttpResponse:
    """`/favicon.ico`, which browsers and tools ask for whatever a page links: the static icon."""
    return redirect(static("pages/favicon.ico"), permanent=True)


@login_required
def session_new(request: HttpRequest) -> HttpResponse:
    """`/chat/new/`: an empty conversation with a fresh id; its first question creates it."""
    context = {"session": None, "session_id": uuid.uuid4(), "turns": [], **_ask_context()}
    return render(request, "pages/session_detail.html", context)


@login_required
def account_detail(request: HttpRequest, segment: str) -> HttpResponse:
    """`/accounts/<segment>`: one of the caller's accounts; 404 for another user's or an unknown id.

    See docs/privacy.md.
    """
    account = account_get_for_user(user=_caller(request), segment=segment)
    if account is None:
        raise Http404("No such account.")
    holdings = list(account.holdings.select_related("security").order_by("-institution_value", "id"))
    return render(request, "pages/account.html", {"account": account, "holdings": holdings, "nav": "portfolio"})


@login_required
def portfolio(request: HttpRequest) -> HttpResponse:
    """`/portfolio/`: the caller's accounts with balances and holdings, and totals by currency."""
    data = portfolio_for_user(user=_caller(request))
    rows: list[dict[str, Any]] = []
    holdings: list[tuple[dict[str, Any], Any]] = []
    for account in data.accounts:
        target_id = account_target_id(account)
        row = {"account": account, "href": account_path(target_id) if target_id else None}
        rows.append(row)
        holdings += [(row, holding) for holding in account.holdings.all()]
    context = {"portfolio": data, "rows": rows, "holdings": holdings, "nav": "portfolio"}
    return render(request, "pages/portfolio.html", context)
