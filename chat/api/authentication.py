"""Token authentication that refuses malformed keys before the database sees them."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS
from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token

from chat.precompiled import PrecompiledQuery

# DRF's keys are 40 lower-case hex digits (`Token.generate_key`).
_TOKEN_KEY = re.compile(r"[0-9a-f]{40}")

#: The user owning a token key: DRF's lookup (`Token.user`, reverse `auth_token`), compiled once.
_TOKEN_USER = PrecompiledQuery(
    lambda key: get_user_model()._default_manager.filter(auth_token__key=key),
    "precompiled-token-key",
)


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's `Authorization: Token <key>`, with the key's shape checked first.

    A key that cannot be a DRF key (a NUL byte, which PostgreSQL refuses in a
    query parameter, or any other junk) is the same 401 "Invalid token." as an
    unknown key, instead of a database error. The user is read by one
    precompiled query (`chat.precompiled`), with DRF's answers: 401
    "Invalid token." for an unknown key, "User inactive or deleted." for an
    inactive user.
    """

    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        if not _TOKEN_KEY.fullmatch(key):
            raise exceptions.AuthenticationFailed("Invalid token.")
        rows = _TOKEN_USER.rows(key)
        if not rows:
            raise exceptions.AuthenticationFailed("Invalid token.")
        user_model = get_user_model()
        user = user_model.from_db(DEFAULT_DB_ALIAS, [f.attname for f in user_model._meta.concrete_fields], rows[0])
        if not user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return user, Token(key=key, user=user)
