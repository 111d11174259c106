"""Start-up errors that say what is wrong in one line (docs/deploying.md#start-up-errors).

A bad `DATABASE_URL` or `CELERY_BROKER_URL` is named, without its password,
with the cause: `DATABASE_URL postgres://app@127.0.0.1:5432/nodb: database
"nodb" does not exist`. The server's own reason is safe to show (it names
the database, the role or the host, never a password or a row).

- `url_problem` (settings, no import beyond the standard library): a URL
  with no scheme, or one we do not know, is `ImproperlyConfigured`.
- `probe_database` (the pool's first connection, `silvia/postgresql`;
  `require_database` for the web and the worker, `silvia/celery.py`): one
  plain connection with a 2 s timeout before psycopg-pool's, which would
  retry for `DATABASE_POOL_TIMEOUT` (10 s) and print a warning a try.
- `require_broker` (a worker's start, `silvia/celery.py`): one connection
  to the broker with a 2 s timeout, where Celery would retry for ever.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.db.utils import OperationalError

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "BrokerUnavailable",
    "DatabaseUnavailable",
    "StartupError",
    "database_url",
    "probe_database",
    "require_broker",
    "url_problem",
    "url_without_password",
]

#: How long a start-up check waits for a server (libpq's smallest `connect_timeout`).
CONNECT_TIMEOUT_SECONDS = 2


class StartupError(Exception):
    """A process cannot start: `str(error)` is the one line to print."""


class DatabaseUnavailable(StartupError, OperationalError):
    """The database of `DATABASE_URL` does not answer, or refuses the connection. A Django `OperationalError`
    too, so that code which rides out a database that is down rides this out as well."""


class BrokerUnavailable(StartupError):
    """The broker of `CELERY_BROKER_URL` does not answer, or refuses the connection."""


def url_without_password(url: str) -> str:
    """`url` with any password taken out of its user part (`amqp://guest:secret@h/` -> `amqp://guest@h/`)."""
    if "://" not in url:  # no URL at all; `user:password@host` may still be in it
        return re.sub(r"^([^:@/]*):[^@]*@", r"\1@", url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a URL that cannot be parsed>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc}" if user else netloc))


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def url_problem(variable: str, url: str, schemes: tuple[str, ...], example: str) -> str | None:
    """What is wrong with `url` for `variable`, on one line, or None: no `scheme://`, or a scheme not in
    `schemes` (an empty tuple takes any). The line names the URL without its password and an example."""
    shown = url_without_password(url)
    if not _SCHEME.match(url):
        return f"{variable} {shown!r} has no scheme: expected a URL such as {example}"
    scheme = url.split("://", 1)[0].lower()
    if schemes and scheme not in schemes:
        known = f"expected one of {', '.join(schemes)}" if len(schemes) <= 6 else "not a kombu transport"
        return f"{variable} {shown}: unknown scheme {scheme!r} ({known}; e.g. {example})"
    return None


def database_url(settings_dict: Mapping[str, Any]) -> str:
    """The URL of a Django PostgreSQL database, as the connection uses it, without a password."""
    user, host, port = settings_dict.get("USER") or "", settings_dict.get("HOST") or "", settings_dict.get("PORT")
    where = f"{host}:{port}" if host and port else host
    return f"postgres://{user + '@' if user else ''}{where}/{settings_dict.get('NAME') or ''}"


def _server_reason(error: Exception) -> str:
    """psycopg's connection error as one short line: each attempt's reason, without libpq's framing and hints."""
    reasons: list[str] = []
    for line in str(error).splitlines():
        if " failed: " in line:
            reason = re.sub(r"^(FATAL|ERROR):\s+", "", line.rsplit(" failed: ", 1)[1].strip())
            if reason and reason not in reasons:
                reasons.append(reason)
    first = str(error).strip().splitlines()
    return "; ".join(reasons) or (first[0] if first else type(error).__name__)


def probe_database(params: Mapping[str, Any], settings_dict: Mapping[str, Any]) -> None:
    """Connect once with `params` (`finance.libpq.libpq_params`) within `CONNECT_TIMEOUT_SECONDS`, then
    close. Raises `DatabaseUnavailable` naming the database's URL and the server's reason."""
    import psycopg

    timeout = min(int(params.get("connect_timeout") or CONNECT_TIMEOUT_SECONDS), CONNECT_TIMEOUT_SECONDS)
    try:
        psycopg.connect(**{**params, "connect_timeout": timeout}).close()
    except psycopg.OperationalError as error:
        raise DatabaseUnavailable(f"DATABASE_URL {database_url(settings_dict)}: {_server_reason(error)}") from None


def require_database() -> None:
    """`probe_database` for the default database, when it is PostgreSQL (a web or worker process starting)."""
    from django.db import connection

    from finance.libpq import libpq_params

    if connection.vendor == "postgresql":
        probe_database(libpq_params(connection.settings_dict), connection.settings_dict)


def require_broker(url: str) -> None:
    """Connect once to the broker at `url` within `CONNECT_TIMEOUT_SECONDS` (not the embedded or in-memory
    ones: nothing to reach). Raises `BrokerUnavailable` naming the URL without its password and the reason."""
    from kombu import Connection
    from kombu.transport import TRANSPORT_ALIASES

    problem = url_problem("CELERY_BROKER_URL", url, tuple(sorted(TRANSPORT_ALIASES)), "amqp://user@host:5672/vhost")
    if problem:
        raise BrokerUnavailable(problem)
    if url.startswith(("filesystem://", "memory://")):
        return
    try:
        broker = Connection(url, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    except Exception as error:  # the transport's client library is missing or refuses the URL
        raise BrokerUnavailable(
            f"CELERY_BROKER_URL {url_without_password(url)}: its transport cannot be loaded "
            f"({type(error).__name__}; is its client library installed?)"
        ) from None
    try:
        broker.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=CONNECT_TIMEOUT_SECONDS)
    except Exception as error:  # kombu's OperationalError, an OSError, the transport's own errors
        cause = error.__cause__ or error.__context__ or error
        reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(error) or type(error).__name__
        raise BrokerUnavailable(f"CELERY_BROKER_URL {url_without_password(url)}: {reason}") from None
    finally:
        broker.release()
