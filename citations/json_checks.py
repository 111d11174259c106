"""Type checks of a turn record's decoded JSON that name the path of what is wrong (docs/turns.md#the-record).

`TurnRecordError` and the helpers that raise it, shared by the record's
validator (`citations.turn`) and each tool's output check (its `ToolSpec`
in `citations.citable`), so both word their errors alike:
`events[3].output.rows: expected a list, got an object`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["TurnRecordError", "describe", "expect", "optional_str", "required"]


class TurnRecordError(ValueError):
    """A turn record refused whole.

    `path` is the JSON path of the offending value (`events[3].output.rows`,
    `record` for the top level), `message` says what is wrong there.
    `str(error)` is `"<path>: <message>"`.
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


_JSON_TYPE_NAMES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    type(None): "null",
}


def describe(value: object) -> str:
    """The JSON type of `value` in words (`an object`, `a list`, `null`, ...)."""
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


_T = TypeVar("_T")


def expect(value: object, kind: type[_T], path: str, what: str) -> _T:
    """`value` when it is a `kind` (a boolean is no number), else `TurnRecordError` at `path`."""
    if isinstance(value, bool) and kind in (int, float):
        raise TurnRecordError(path, f"expected {what}, got a boolean")
    if not isinstance(value, kind):
        raise TurnRecordError(path, f"expected {what}, got {describe(value)}")
    return value


def required(obj: Mapping[str, Any], key: str, kind: type[_T], path: str, what: str) -> _T:
    """`obj[key]` checked by `expect`; a key that is not there at all is `missing (expected <what>)`, not `got null`."""
    if key not in obj:
        raise TurnRecordError(path, f"missing (expected {what})")
    return expect(obj[key], kind, path, what)


def optional_str(obj: Mapping[str, Any], key: str, path: str) -> None:
    """`obj[key]`, when present and not null, must be a string (`TurnRecordError` at `path.key`)."""
    value = obj.get(key)
    if value is not None:
        expect(value, str, f"{path}.{key}", "a string or null")
