"""The one logging configuration (`settings.LOGGING`), for runserver, gunicorn, uvicorn and commands alike."""

from __future__ import annotations

import logging
from typing import Any

_FILTERS = ["bad_request", "privacy"]
_ACCESS_FILTERS = ["privacy", "quiet_healthz"]


def _off() -> dict[str, Any]:
    """A logger config with no handler: the logger's records go nowhere (a fresh dict each time)."""
    return {"handlers": [], "propagate": False}


def uvicorn_turned_access_log_off() -> bool:
    """Whether uvicorn, started with `--no-access-log`, already emptied its access logger in this process.

    uvicorn configures logging before it imports the application (and so
    Django's settings): with `--no-access-log` it leaves `uvicorn.access`
    with no handler and no propagation, and it logs a request only when
    that logger has a handler. A config that gave it one back would undo
    the flag.
    """
    logger = logging.Logger.manager.loggerDict.get("uvicorn.access")
    return isinstance(logger, logging.Logger) and not logger.handlers and not logger.propagate


def build_logging(level: str, *, access_log: bool = True) -> dict[str, Any]:
    """A `logging.config.dictConfig` dict: everything to stderr at `level` (e.g. "DEBUG").

    Every handler carries `silvia.log_filters.PrivacyFilter`, so no logger,
    whatever its level, can bypass it. uvicorn's loggers are listed so that
    Django's setup, which runs when uvicorn imports `silvia.asgi`, replaces
    uvicorn's own handlers (which have no filter) with these.

    `access_log=False` (`DJANGO_ACCESS_LOG=false`), or uvicorn's
    `--no-access-log`, leaves uvicorn's and runserver's access loggers with
    no handler: no request line at all (docs/deploying.md#logging).
    """
    access_log = access_log and not uvicorn_turned_access_log_off()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "privacy": {"()": "silvia.log_filters.PrivacyFilter"},
            "bad_request": {"()": "silvia.log_filters.BadRequestWarning"},
            "quiet_healthz": {"()": "silvia.log_filters.QuietHealthCheck"},
        },
        "formatters": {
            "plain": {"format": "{asctime} {levelname} {name}: {message}", "style": "{"},
            "django.server": {
                "()": "django.utils.log.ServerFormatter",
                "format": "[{server_time}] {message}",
                "style": "{",
            },
        },
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": _FILTERS},
            "access": {"class": "logging.StreamHandler", "formatter": "plain", "filters": _ACCESS_FILTERS},
            "django.server": {
                "class": "logging.StreamHandler",
                "formatter": "django.server",
                "filters": _ACCESS_FILTERS,
            },
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # Django's own loggers do not also propagate to the root (that printed each line twice).
            "django": {"handlers": ["console"], "level": level, "propagate": False},
            "django.server": (
                {"handlers": ["django.server"], "level": "INFO", "propagate": False} if access_log else _off()
            ),
            "uvicorn": {"handlers": ["console"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": ({"handlers": ["access"], "level": "INFO", "propagate": False} if access_log else _off()),
            # gunicorn (the web process): its own handlers are replaced by these, filtered.
            "gunicorn.error": {"handlers": ["console"], "level": "INFO", "propagate": False},
            "gunicorn.access": (
                {"handlers": ["access"], "level": "INFO", "propagate": False} if access_log else _off()
            ),
        },
    }
