"""Reading turn records from `.json` and `.jsonl` files, with line numbers.

A `.json` file holds one record (an object) or a list of records; a `.jsonl`
file one record per line (blank lines are skipped). Every record comes with
the line it starts on, so an import can report `file:line: path: message`.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


# Strict JSON (RFC 8259): Python's decoder would take NaN and Infinity.
_decoder = json.JSONDecoder(parse_constant=_reject_constant)
_WHITESPACE = " \t\n\r"


def _not_json(error: Exception) -> str:
    """The message for a value the decoder refused: syntax, a constant that is
    not JSON, an integer over Python's digit limit, nesting too deep."""
    if isinstance(error, json.JSONDecodeError):
        return f"not JSON: {error.msg} (column {error.colno})"
    if isinstance(error, RecursionError):
        return "not JSON: nested too deeply to read"
    return f"not JSON: {error}"


_DECODE_ERRORS = (ValueError, RecursionError)  # JSONDecodeError is a ValueError


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One decoded record, or the reason it could not be decoded (`error`)."""

    line: int
    value: Any = None
    error: str | None = None


class TurnFileError(ValueError):
    """The file as a whole cannot be read (missing, not UTF-8, wrong suffix)."""


def _line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _skip_whitespace(text: str, position: int) -> int:
    while position < len(text) and text[position] in _WHITESPACE:
        position += 1
    return position


def _json_records(text: str) -> Iterator[FileRecord]:
    position = _skip_whitespace(text, 0)
    if not text.startswith("[", position):
        try:
            value, end = _decoder.raw_decode(text, position)
        except _DECODE_ERRORS as error:
            yield FileRecord(getattr(error, "lineno", _line_of(text, position)), error=_not_json(error))
            return
        if _skip_whitespace(text, end) != len(text):
            yield FileRecord(_line_of(text, end), error="not JSON: extra data after the record")
            return
        yield FileRecord(_line_of(text, position), value)
        return
    # A list: decode element by element to know the line each record starts on.
    position = _skip_whitespace(text, position + 1)
    if text.startswith("]", position):
        return
    while True:
        try:
            value, end = _decoder.raw_decode(text, position)
        except _DECODE_ERRORS as error:
            line = getattr(error, "lineno", _line_of(text, position))
            yield FileRecord(line, error=f"{_not_json(error)}; rest of file skipped")
            return
        yield FileRecord(_line_of(text, position), value)
        position = _skip_whitespace(text, end)
        if text.startswith(",", position):
            position = _skip_whitespace(text, position + 1)
            continue
        if text.startswith("]", position) and _skip_whitespace(text, position + 1) == len(text):
            return
        yield FileRecord(_line_of(text, position), error="not JSON: expected ',' or the closing ']'; rest of file skipped")
        return


def _jsonl_records(lines: Iterator[str]) -> Iterator[FileRecord]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield FileRecord(number, _decoder.decode(line))
        except _DECODE_ERRORS as error:
            yield FileRecord(number, error=_not_json(error))


def read_turn_records(path: Path) -> Iterator[FileRecord]:
    """Yield the records of a `.json` or `.jsonl` file in order.

    A `.jsonl` file is streamed line by line (memory stays flat on large
    files). Raises `TurnFileError` when the file cannot be opened, is not
    UTF-8 or has another suffix; a record that is not JSON is yielded with
    its `error` and the line it is on.
    """
    suffix = path.suffix.lower()
    if suffix not in (".json", ".jsonl"):
        raise TurnFileError(f"{path}: expected a .json or .jsonl file")
    try:
        if suffix == ".jsonl":
            # utf-8-sig: a byte-order mark some editors write is not part of the JSON.
            with path.open(encoding="utf-8-sig") as handle:
                yield from _jsonl_records(handle)
        else:
            yield from _json_records(path.read_text(encoding="utf-8-sig"))
    except OSError as error:
        raise TurnFileError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise TurnFileError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None


def count_lines(path: Path) -> int:
    """Number of lines of a file, for progress totals (0 when unreadable)."""
    try:
        with path.open("rb") as handle:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    except OSError:
        return 0
