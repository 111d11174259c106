"""The pages through Django's test client (docs/privacy.md and docs/pages.md): sign-in and sign-out, the
session list and pages scoped to the caller and paginated, everything stored escaped, no provider, the ask
form only with a model configured, no asset from elsewhere, the favicon."""

from __future__ import annotations

import datetime as dt
import re
import uuid

import pytest

from tests.factories import ChatLogFactory, ChatSessionFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_home_sends_a_visitor_to_sign_in_and_a_user_to_the_sessions(client, maya_client):
    assert client.get("/").url == "/login/"
    assert maya_client.get("/").url == "/chat/"


@pytest.mark.parametrize("path", ["/chat/", "/chat/new/", f"/chat/{uuid.uuid4()}/", "/portfolio/", "/accounts/abc"])
def test_pages_need_a_signed_in_user(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response.url == f"/login/?next={path}"


def test_sign_in_with_a_password_then_sign_out(client, maya):
    maya.set_password("pw-for-test-1")
    maya.save()
    assert "Sign in" in client.get("/login/").content.decode()
    response = client.post("/login/", {"username": "maya", "password": "pw-for-test-1"})
    assert response.status_code == 302 and response.url == "/chat/"
    assert client.get("/chat/").status_code == 200
    assert client.post("/logout/").url == "/login/"
    assert client.get("/chat/").status_code == 302


def test_a_wrong_password_says_so(client, maya):
    response = client.post("/login/", {"username": "maya", "password": "nope"})
    assert response.status_code == 200
    assert "didn't match" in response.content.decode()


def test_session_list_is_the_callers_newest_first_50_a_page(maya_client, maya, other_user):
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for n in range(51):
        at = start + dt.timedelta(days=n)
        ChatSessionFactory.create(user=maya, title=f"Mine {n:02d}", created_at=at, updated_at=at)
    ChatSessionFactory.create(user=other_user, title="Not mine")
    first = maya_client.get("/chat/").content.decode()
    titles = re.findall(r'class="sessions__title">([^<]*)<', first)
    assert len(titles) == 50
    assert titles[0] == "Mine 50" and titles[-1] == "Mine 01"
    assert "Not mine" not in first
    assert re.findall(r'class="sessions__title">([^<]*)<', maya_client.get("/chat/?page=2").content.decode()) == [
        "Mine 00"
    ]


def test_session_list_counts_each_sessions_questions(maya_client, maya, other_user, django_assert_num_queries):
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    sizes = {"Three": 3, "One": 1, "None yet": 0}
    for n, (title, size) in enumerate(sizes.items()):
        at = start - dt.timedelta(days=n)  # newest first: the order of `sizes`
        session = ChatSessionFactory.create(user=maya, title=title, created_at=at, updated_at=at)
        for _ in range(size):
            ChatLogFactory.create(session=session)
    ChatLogFactory.create_batch(2, session=ChatSessionFactory.create(user=other_user))
    # Django session, user, the count of maya's sessions, one page of them with their turns counted.
    with django_assert_num_queries(4):
        html = maya_client.get("/chat/").content.decode()
    metas = re.findall(r"</time> · ([^<]*)</span>", html)
    assert metas == ["3 questions", "1 question", "0 questions"]


@pytest.mark.parametrize(
    "session_id", ["sam", "not-a-uuid", str(uuid.uuid4()), "D93ADA3E-AF5F-4E4E-823C-781FEC71F26D-x"]
)
def test_another_users_or_a_missing_session_is_404(maya_client, other_user, session_id):
    theirs = ChatSessionFactory.create(user=other_user)
    path = f"/chat/{theirs.id if session_id == 'sam' else session_id}/"
    response = maya_client.get(path)
    assert response.status_code == 404
    assert theirs.title not in response.content.decode()


def test_session_page_shows_question_answer_and_chips(maya_client, maya):
    log = ChatLogFactory.create(session__user=maya, session__title="Worth", user_message="What is my portfolio worth?")
    html = maya_client.get(f"/chat/{log.session_id}/").content.decode()
    assert "What is my portfolio worth?" in html
    # "Your portfolio is worth $1,000." with the span 24..30 = "$1,000" marked and its chip after it.
    assert 'Your portfolio is worth <mark class="cited">$1,000</mark><span class="chip chip--portfolio"' in html
    assert '<a class="chip__label" href="/portfolio/">Your portfolio</a>' in html
    assert '<q class="chip__cited">total: 1000</q>' in html


HOSTILE = '<script>alert("x")</script>'


def test_everything_stored_is_escaped(maya_client, maya):
    entry = {"source": "javascript:alert(1)", "title": HOSTILE, "cited_text": HOSTILE, "start": 0, "end": 5}
    log = ChatLogFactory.create(
        session__user=maya,
        session__title=HOSTILE,
        user_message=HOSTILE,
        response=f"Hello {HOSTILE}",
        citations=[entry],
        inline_citations=[
            {**entry, "target": {"kind": "web", "url": "javascript:alert(1)"}},
            {**entry, "start": 99},
            {
                **entry,
                "target": {"kind": "account", "accountId": '"><img src=x onerror=alert(1)>', "provider": "plaid"},
            },
        ],
    )
    html = maya_client.get(f"/chat/{log.session_id}/").content.decode()
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert 'href="javascript' not in html.lower()
    # The account id is percent-encoded into its path, as encodeURIComponent does.
    assert 'href="/accounts/%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E"' in html
    # The span past the end still shows its chip, after the text.
    assert html.count('class="stray"') == 1
    assert "plaid" not in html


def test_no_provider_and_no_model_says_so(maya_client, maya, settings):
    settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL = "", None
    accounts = [{"accountId": "a" * 20, "provider": "snaptrade"}, {"accountId": "b" * 20, "provider": "manual"}]
    log = ChatLogFactory.create(
        session__user=maya,
        inline_citations=[
            {
                "source": "s",
                "title": "Cards",
                "cited_text": "x",
                "start": 0,
                "end": 4,
                "target": {"kind": "accounts", "accounts": accounts},
            }
        ],
    )
    html = maya_client.get(f"/chat/{log.session_id}/").content.decode()
    assert ">2 accounts</button>" in html
    assert 'href="/accounts/aaaaaaaaaaaaaaaaaaaa">Cards (1 of 2)</a>' in html
    assert "snaptrade" not in html and "manual" not in html and "provider" not in html
    assert 'id="ask-off"' in html and 'id="ask-form"' not in html


def test_the_ask_form_shows_when_a_model_is_configured(maya_client, maya, settings):
    settings.ANTHROPIC_CONFIGURED = True
    log = ChatLogFactory.create(session__user=maya)
    html = maya_client.get(f"/chat/{log.session_id}/").content.decode()
    assert f'data-session-id="{log.session_id}"' in html and 'id="ask-off"' not in html


def test_a_new_conversation_page_has_a_fresh_id(maya_client, settings):
    settings.ANTHROPIC_API_KEY = "sk-test"
    first = maya_client.get("/chat/new/").content.decode()
    second = maya_client.get("/chat/new/").content.decode()
    assert "Ask your first question below." in first
    matches = [re.search(r'data-session-id="([0-9a-f-]{36})"', html) for html in (first, second)]
    ids = [match.group(1) for match in matches if match is not None]
    assert len(ids) == 2
    assert ids[0] != ids[1]
    assert f'data-session-url="/chat/{ids[0]}/"' in first


@pytest.mark.parametrize(
    ("explicit", "key", "base_url", "expected"),
    [
        (None, "", None, False),
        (None, "sk-test", None, True),
        (None, "", "http://127.0.0.1:9", True),
        (False, "sk-test", None, False),
        (True, "", None, True),
    ],
)
def test_model_configured(settings, explicit, key, base_url, expected):
    from pages.views import model_configured

    if explicit is not None:
        settings.ANTHROPIC_CONFIGURED = explicit
    settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL = key, base_url
    assert model_configured() is expected


def test_static_files_are_served_without_a_cdn(maya_client, maya):
    log = ChatLogFactory.create(session__user=maya)
    html = maya_client.get(f"/chat/{log.session_id}/").content.decode()
    assert re.findall(r'(?:src|href)="(https?:)?//', html) == []
    for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', html):
        assert asset.startswith("/static/pages/")


def test_another_user_is_just_another_user(client, other_user):
    mine = ChatSessionFactory.create(user=UserFactory.create(username="maya"))
    client.force_login(other_user)
    assert client.get(f"/chat/{mine.id}/").status_code == 404


def test_a_long_session_opens_on_its_latest_50_turns(maya_client, maya):
    session = ChatSessionFactory.create(user=maya)
    for n in range(51):
        ChatLogFactory.create(session=session, user_message=f"Question {n:02d}")
    latest = maya_client.get(f"/chat/{session.id}/").content.decode()
    questions = re.findall(r"<p>(Question \d\d)</p>", latest)
    assert questions[0] == "Question 01" and questions[-1] == "Question 50" and len(questions) == 50
    assert 'href="?page=2" rel="prev">Earlier questions' in latest
    earlier = maya_client.get(f"/chat/{session.id}/?page=2").content.decode()
    assert re.findall(r"<p>(Question \d\d)</p>", earlier) == ["Question 00"]
    assert 'href="?page=1" rel="next">Later questions' in earlier
    assert 'class="ask"' not in earlier


def test_the_favicon_is_where_browsers_look(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response.url == "/static/pages/favicon.ico"
