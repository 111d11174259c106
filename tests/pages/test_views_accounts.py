"""The account and portfolio pages through Django's test client (docs/privacy.md and docs/pages.md): the
caller's own accounts only, no page for a wallet or an unknown id, an account chip named as the caller names
the account, and the query budgets of the session and portfolio pages."""

from __future__ import annotations

import pytest

from tests.factories import ChatLogFactory, ChatSessionFactory

pytestmark = pytest.mark.django_db


def test_unknown_account_is_404(maya_client):
    assert maya_client.get("/accounts/not-an-account-id-000").status_code == 404


@pytest.fixture
def demo_finance(maya, other_user):
    from finance.demo import seed_demo_finance

    seed_demo_finance(maya=maya, sam=other_user)


def _account(username, name):
    from finance.models import Account

    return Account.objects.get(user__username=username, name=name)


def test_account_page_is_the_callers_own(maya_client, demo_finance):
    card = _account("maya", "Checking")
    html = maya_client.get(f"/accounts/{card.source_account_id}").content.decode()
    assert "<h1>Chase Total Checking</h1>" in html
    assert "$4,820.17" in html
    assert "plaid" not in html.lower()
    # A trailing slash is tolerated; the percent-encoded form of the same id is the same account.
    assert maya_client.get(f"/accounts/{card.source_account_id}/").status_code == 200


def test_another_users_account_is_404(maya_client, demo_finance):
    theirs = _account("sam", "Venture card")
    response = maya_client.get(f"/accounts/{theirs.source_account_id}")
    assert response.status_code == 404
    assert "Venture" not in response.content.decode()


def test_a_wallet_has_no_account_page(maya_client, demo_finance):
    wallet = _account("maya", "Crypto wallet")
    assert maya_client.get(f"/accounts/{wallet.source_account_id}").status_code == 404


def test_portfolio_lists_only_the_callers_accounts_with_links(maya_client, demo_finance):
    html = maya_client.get("/portfolio/").content.decode()
    card = _account("maya", "Checking")
    assert f'<a href="/accounts/{card.source_account_id}">Chase Total Checking</a>' in html
    assert "Venture" not in html and "Everyday checking" not in html
    assert "Crypto wallet" in html and 'href="/accounts/0x' not in html
    assert "clerk" not in html.lower() and "access-production" not in html


def test_account_chip_shows_the_callers_name_for_it(maya_client, maya, demo_finance):
    card = _account("maya", "Checking")
    target = {"kind": "account", "accountId": card.source_account_id, "provider": "plaid"}
    log = ChatLogFactory.create(
        session__user=maya,
        inline_citations=[
            {"source": "s", "title": "Checking", "cited_text": "x", "start": 0, "end": 4, "target": target}
        ],
    )
    html = maya_client.get(f"/chat/{log.session_id}/").content.decode()
    assert f'<a class="chip__label" href="/accounts/{card.source_account_id}">Chase Total Checking</a>' in html


def test_session_page_query_budget(maya_client, maya, demo_finance, django_assert_num_queries):
    session = ChatSessionFactory.create(user=maya)
    for _ in range(20):
        ChatLogFactory.create(session=session)
    # Django session, user, the chat session, the caller's accounts (for chip names), turn count, its turns.
    with django_assert_num_queries(6):
        response = maya_client.get(f"/chat/{session.id}/")
    assert response.content.decode().count('class="turn"') == 20


def test_portfolio_query_budget(maya_client, demo_finance, django_assert_num_queries):
    # Django session, user, accounts with their connection, holdings with their security.
    with django_assert_num_queries(4):
        maya_client.get("/portfolio/")
