"""Failures of a live turn as docs/live.md `error` events: a type and a message fit to show a user.

The message never carries a stack, a key, SQL or the API's own wording. Log
lines about an exception name its class and where it was raised
(`where_raised`), never its text: the SDK's and the tools' messages can quote
a tool input or a row, account ids included.
"""

from __future__ import annotations

import os
import traceback

import anthropic

__all__ = ["ModelStreamCutError", "TurnFailure", "failure_from_error_event", "failure_from_exception", "where_raised"]

MESSAGES = {
    "overloaded_error": "The assistant is overloaded right now. Please try again in a moment.",
    "rate_limit_error": "Too many questions at once right now. Please try again in a minute.",
    "api_error": "The assistant service had a problem. Please try again.",
    "timeout_error": "The assistant took too long to answer. Please try again.",
    "authentication_error": "The assistant is not available right now (the service's API key was refused).",
    "connection_error": "The connection to the assistant broke. Please try again.",
    "invalid_request_error": "The assistant could not process this question.",
    "internal_error": "Something went wrong on our side. Please try again.",
    "max_steps": "The assistant needed too many steps for this question.",
    "max_tokens": "The assistant ran out of room before it could look something up. Please ask for less at once.",
    "model_stream_cut": "The assistant's answer was cut off before it was complete. Please try again.",
    "answer_too_long": "The answer grew longer than this service keeps. Please ask for less at once.",
}


class TurnFailure(Exception):
    """Ends a turn with an `error` event `{"type": kind, "message": message}`."""

    def __init__(self, kind: str, message: str | None = None) -> None:
        super().__init__(kind)
        self.kind = kind
        self.message = message or MESSAGES.get(kind, MESSAGES["internal_error"])


class ModelStreamCutError(TurnFailure):
    """A model step's stream ended before `message_stop` with a stop reason (SPEC 11): no answer. The turn
    runner asks again (`LIVE_TURN_CUT_STREAM_RETRIES`), then fails the turn with it."""

    def __init__(self) -> None:
        super().__init__("model_stream_cut")


def _status_kind(status: int, body_type: object) -> str:
    if not isinstance(body_type, str):  # the model's `error` event may hold any JSON there
        body_type = None
    if body_type in MESSAGES:
        return body_type
    if status < 400:  # an `error` event mid-stream (the stream's 200) of a type we do not know
        return "api_error"
    if body_type in ("permission_error",):
        return "authentication_error"
    if status == 529 or body_type == "overloaded_error":
        return "overloaded_error"
    if status == 429:
        return "rate_limit_error"
    if status in (401, 403):
        return "authentication_error"
    if status >= 500:
        return "api_error"
    return "invalid_request_error"


def failure_from_error_event(body: object) -> TurnFailure:
    """The failure a Messages API `error` event mid-stream names (`body`: its `data`, parsed; None when it was
    no JSON): `{"type": "error", "error": {"type": "overloaded_error", ...}}` is `overloaded_error`, a type we
    do not know (or no type, or one that is no string) `api_error`. As the SDK's `APIStatusError` for it would
    be classified by `failure_from_exception`: the stream's status is 200."""
    error = body.get("error") if isinstance(body, dict) else None
    return TurnFailure(_status_kind(200, error.get("type") if isinstance(error, dict) else None))


def failure_from_exception(error: BaseException) -> TurnFailure:
    """Classify an exception from a model step (the SDK's errors, a broken stream) as a `TurnFailure`."""
    if isinstance(error, TurnFailure):
        return error
    if isinstance(error, anthropic.APIStatusError):
        # A mid-stream `error` event arrives with the stream's 200 status and its own type.
        return TurnFailure(_status_kind(error.status_code, error.type))
    if isinstance(error, anthropic.APITimeoutError):
        return TurnFailure("timeout_error")
    if isinstance(error, anthropic.APIConnectionError):
        return TurnFailure("connection_error")
    name = type(error).__name__
    # The HTTP client's own errors while a stream is read (not wrapped by the SDK).
    if "Timeout" in name:
        return TurnFailure("timeout_error")
    if type(error).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "h11") or isinstance(error, OSError):
        return TurnFailure("connection_error")
    return TurnFailure("internal_error")


def where_raised(error: BaseException) -> str:
    """`ValueError at runner.py:123 (model_step)`: the class and the innermost frame, no message or values."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return type(error).__name__
    last = frames[-1]
    return f"{type(error).__name__} at {os.path.basename(last.filename)}:{last.lineno} ({last.name})"
