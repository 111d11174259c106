"""Whether live turns can reach a model (docs/live.md#admission); imports nothing heavy (pages use it)."""

from __future__ import annotations

import logging

from django.conf import settings

__all__ = ["NOT_CONFIGURED", "model_configured", "warn_if_no_model"]

logger = logging.getLogger("live")

NOT_CONFIGURED = "Live answers are not configured on this server."


def model_configured() -> bool:
    """Whether live turns can reach a model: `ANTHROPIC_CONFIGURED` when set, else an API key or a base URL."""
    explicit = getattr(settings, "ANTHROPIC_CONFIGURED", None)
    if explicit is not None:
        return bool(explicit)
    return bool(settings.ANTHROPIC_API_KEY or settings.ANTHROPIC_BASE_URL)


def warn_if_no_model() -> None:
    """One warning for the operator at a web or worker process's start when no model is configured."""
    if not model_configured():
        logger.warning(
            "live answers are not configured on this server: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL); "
            "the turn endpoint answers 503 until then"
        )
