"""Sign-in that resists guessing (issue 39; docs/deploying.md#sign-in-throttling): django-axes at `/login/` and
`/admin/login/`, per account and per address; the API's token auth untouched."""

from __future__ import annotations

import datetime as dt

import pytest
from axes.models import AccessAttempt
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.factories import UserFactory

PASSWORD = "maya-password-1"


@pytest.fixture
def maya(db):
    user = UserFactory.create(username="maya")
    user.set_password(PASSWORD)
    user.save()
    return user


def sign_in(path: str, username: str, password: str, address: str = "203.0.113.7"):
    client = Client(REMOTE_ADDR=address)
    response = client.post(path, {"username": username, "password": password})
    return response, client


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_guessing_locks_the_account_and_the_address_then_the_right_password_is_refused(maya, settings, path):
    if path == "/admin/login/":
        maya.is_staff = True
        maya.save()
    statuses = [sign_in(path, "maya", f"guess-{n}")[0].status_code for n in range(30)]
    assert statuses[:4] == [200] * 4  # the form again, "Please enter a correct username and password"
    assert set(statuses[4:]) == {429}  # the 5th failure locks (LOGIN_FAILURE_LIMIT); then refused unchecked
    response, client = sign_in(path, "maya", PASSWORD)
    assert response.status_code == 429 and not signed_in(client)
    assert b"Too many failed sign-ins for this account or from this address" in response.content
    # Per account: from another address too; per address: another account from this one.
    other = UserFactory.create(username="sam", is_staff=True)
    other.set_password("sam-password-1")
    other.save()
    assert sign_in(path, "maya", PASSWORD, address="198.51.100.9")[0].status_code == 429
    assert sign_in(path, "sam", "sam-password-1")[0].status_code == 429
    assert sign_in(path, "sam", "sam-password-1", address="198.51.100.9")[0].status_code == 302


def test_each_address_guessing_once_still_locks_the_account(maya):
    for n in range(4):
        assert sign_in("/login/", "maya", "wrong", address=f"192.0.2.{n + 1}")[0].status_code == 200
    assert sign_in("/login/", "maya", "wrong", address="192.0.2.5")[0].status_code == 429
    assert sign_in("/login/", "maya", PASSWORD, address="192.0.2.99")[0].status_code == 429


def test_the_lock_ends_after_the_cool_off_and_a_success_resets_the_count(maya, settings):
    for _ in range(5):
        sign_in("/login/", "maya", "wrong")
    assert sign_in("/login/", "maya", PASSWORD)[0].status_code == 429
    # The cool-off (LOGIN_COOLOFF_MINUTES, 15) passes: the attempts age.
    AccessAttempt.objects.update(attempt_time=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=16))
    response, client = sign_in("/login/", "maya", PASSWORD)
    assert response.status_code == 302 and signed_in(client)
    for _ in range(4):
        sign_in("/login/", "maya", "wrong")
    response, client = sign_in("/login/", "maya", PASSWORD)
    assert response.status_code == 302 and signed_in(client)  # 4 failures, then the right one: in
    assert not AccessAttempt.objects.filter(username="maya").exists()  # and the count starts again


def test_the_apis_token_auth_is_not_locked(maya):
    token = Token.objects.create(user=maya).key
    for _ in range(6):
        sign_in("/login/", "maya", "wrong")
    api = APIClient(REMOTE_ADDR="203.0.113.7")
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/api/chat/sessions/").status_code == 200
    api.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert api.get("/api/chat/sessions/").status_code == 401  # refused as before, never counted
