"""The one logging configuration (`settings.LOGGING`), for runserver, uvicorn and commands alike."""

from __future__ import annotations

from typing import Any

_FILTERS = ["privacy"]
_ACCESS_FILTERS = ["privacy", "quiet_healthz"]


def build_logging(level: str) -> dict[str, Any]:
    """A `logging.config.dictConfig` dict: everything to stderr at `level` (e.g. "DEBUG").

    Every handler carries `silvia.log_filters.PrivacyFilter`, so no logger,
    whatever its level, can bypass it. uvicorn's loggers are listed so that
    Django's setup, which runs when uvicorn imports `silvia.asgi`, replaces
    uvicorn's own handlers (which have no filter) with these.
    """
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "privacy": {"()": "silvia.log_filters.PrivacyFilter"},
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
            "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
            "uvicorn": {"handlers": ["console"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        },
    }
