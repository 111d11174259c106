"""Token authentication that refuses malformed keys before the database sees them."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token

from chat import hot_reads

# DRF's keys are 40 lower-case hex digits (`Token.generate_key`).
_TOKEN_KEY = re.compile(r"[0-9a-f]{40}")


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's `Authorization: Token <key>`, with the key's shape checked first.

    A key that cannot be a DRF key (a NUL byte, which PostgreSQL refuses in a
    query parameter, or any other junk) is the same 401 "Invalid token." as an
    unknown key, instead of a database error. The user is read by one
    statement (`chat.hot_reads.token_user`), with DRF's answers: 401
    "Invalid token." for an unknown key, "User inactive or deleted." for an
    inactive user.
    """

    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        if not _TOKEN_KEY.fullmatch(key):
            raise exceptions.AuthenticationFailed("Invalid token.")
        user = hot_reads.token_user(key)
        if user is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return user, Token(key=key, user=user)  # type: ignore[misc]  # the stubs want auth.User; any user model is
