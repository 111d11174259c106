"""Token authentication that refuses malformed keys before the database sees them."""

from __future__ import annotations

import re

from rest_framework import authentication, exceptions

# DRF's keys are 40 lower-case hex digits (`Token.generate_key`).
_TOKEN_KEY = re.compile(r"[0-9a-f]{40}")


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's `Authorization: Token <key>`, with the key's shape checked first.

    A key that cannot be a DRF key (a NUL byte, which PostgreSQL refuses in a
    query parameter, or any other junk) is the same 401 "Invalid token." as an
    unknown key, instead of a database error.
    """

    def authenticate_credentials(self, key: str):
        if not _TOKEN_KEY.fullmatch(key):
            raise exceptions.AuthenticationFailed("Invalid token.")
        return super().authenticate_credentials(key)
