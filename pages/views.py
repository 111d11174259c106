"""Thin page views: a selector, a presenter, a template (docs/pages.md)."""

from __future__ import annotations

import uuid
from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from chat.live.configured import model_configured
from chat.selectors import session_get_for_user, session_list_for_user, session_messages
from citations.urls import account_path
from finance.selectors import account_get_for_user, account_target_id, portfolio_for_user
from pages.presenters import answer_pieces
from pages.selectors import account_names_for_user

SESSIONS_PER_PAGE = 50
"""The API's page size (docs/api.md), so both list the same sessions per page."""

TURNS_PER_PAGE = 50
"""Turns on one session page; a long session opens on its latest turns, `?page=N` goes back."""


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
    page = Paginator(session_list_for_user(user=_caller(request)), SESSIONS_PER_PAGE).get_page(request.GET.get("page"))
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
        pieces, stray = answer_pieces(log.response, log.inline_citations, account_names=names)
        turns.append({"log": log, "pieces": pieces, "stray": stray})
    context = {
        "session": session,
        "session_id": session.id,
        "turns": turns,
        "page": page,
        "account_names": names,
        "nav": "chat",
        **_ask_context(),
    }
    return render(request, "pages/session_detail.html", context)


@login_required
def session_new(request: HttpRequest) -> HttpResponse:
    """`/chat/new/`: an empty conversation with a fresh id; its first question creates it."""
    names = account_names_for_user(user=_caller(request))
    context = {"session": None, "session_id": uuid.uuid4(), "turns": [], "account_names": names, **_ask_context()}
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
