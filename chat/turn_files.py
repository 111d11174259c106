"""Reading turn records from `.json` and `.jsonl` files, with line numbers and byte offsets.

A `.json` file holds one record (an object) or a list of records; a `.jsonl`
file one record per line (blank lines are skipped). Every record comes with
the line it starts on, so an import can report `file:line: path: message`.

Reading is linear in the file: `.jsonl` is streamed line by line as bytes,
and a `.json` list is decoded element by element with the line count carried
forward. A bad byte (not UTF-8) or a bad line fails only its own record, with
its line and byte offset; a syntax error inside a `.json` list ends that file
(where the next record starts is unknowable), earlier records still count.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

__all__ = ["DEFAULT_MAX_RECORD_BYTES", "FileRecord", "TurnFileError", "count_lines", "read_turn_records"]

#: Largest record read, in bytes of the file (docs/running.md "Importing turns").
DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


# Strict JSON (RFC 8259): Python's decoder would take NaN and Infinity.
_decoder = json.JSONDecoder(parse_constant=_reject_constant)
_WHITESPACE = " \t\n\r"
_BOM = b"\xef\xbb\xbf"
# orjson reads integers past 64 bits as floats, silently; records holding
# such a literal (or anything orjson refuses) go through the stdlib decoder,
# which keeps them exact and words the refusals the way the tests expect.
# (A run of 19 digits is searched for as 19 zeros in the bytes mapped to
# zeros and spaces: several times faster than a regular expression.)
_DIGITS_TO_ZERO = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_DIGITS = b"0" * 19
# Bytes that were not UTF-8, as `surrogateescape` decoding keeps them.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One decoded record, or the reason it could not be decoded (`error`). `line` counts from 1."""

    line: int
    value: Any = None
    error: str | None = None


class TurnFileError(ValueError):
    """The file as a whole cannot be read (missing, unreadable, wrong suffix)."""


def _not_json(error: Exception) -> str:
    """The message for a value the decoder refused: syntax, a constant that is
    not JSON, an integer over Python's digit limit, nesting too deep."""
    if isinstance(error, json.JSONDecodeError):
        return f"not JSON: {error.msg} (column {error.colno})"
    if isinstance(error, RecursionError):
        return "not JSON: nested too deeply to read"
    return f"not JSON: {error}"


_DECODE_ERRORS = (ValueError, RecursionError)  # JSONDecodeError is a ValueError


def _loads(data: bytes) -> Any:
    """Decode one record: orjson, or the stdlib decoder where orjson would differ or refuses."""
    if _LONG_DIGITS not in data.translate(_DIGITS_TO_ZERO):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return _decoder.decode(data.decode("utf-8"))


def _too_big(size: int, limit: int) -> str:
    return f"record of {size} bytes is over the limit of {limit} bytes (--max-record-bytes)"


def _jsonl_records(handle: IO[bytes], limit: int) -> Iterator[FileRecord]:
    offset = 0
    number = 0
    while True:
        line = handle.readline(limit + 2)
        if not line:
            return
        number += 1
        start = offset
        offset += len(line)
        if number == 1 and line.startswith(_BOM):
            line = line[len(_BOM) :]
        if len(line) > limit + 1 or (len(line) == limit + 1 and not line.endswith(b"\n")):
            # Skip the rest of the over-long line without holding it.
            while line and not line.endswith(b"\n"):
                line = handle.readline(1 << 20)
                offset += len(line)
            yield FileRecord(number, error=_too_big(offset - start, limit))
            continue
        if not line.strip():
            continue
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as error:
            yield FileRecord(
                number,
                error=f"not UTF-8: byte 0x{line[error.start]:02x} at byte offset {start + error.start} of the file",
            )
            continue
        try:
            yield FileRecord(number, _loads(line))
        except _DECODE_ERRORS as error:
            yield FileRecord(number, error=_not_json(error))


def _skip_whitespace(text: str, position: int) -> int:
    while position < len(text) and text[position] in _WHITESPACE:
        position += 1
    return position


class _Lines:
    """Line numbers of positions in `text` visited in increasing order: each newline is counted once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.position = 0
        self.line = 1

    def at(self, position: int) -> int:
        self.line += self.text.count("\n", self.position, position)
        self.position = position
        return self.line


def _bad_byte(text: str, start: int, end: int) -> str | None:
    """The message for the first byte that was not UTF-8 in `text[start:end]`, or None."""
    found = _ESCAPED_BYTE.search(text, start, end)
    if found is None:
        return None
    offset = len(text[: found.start()].encode("utf-8", "surrogateescape"))
    return f"not UTF-8: byte 0x{ord(found.group()) - 0xDC00:02x} at byte offset {offset} of the file"


def _element(text: str, position: int, dirty: bool, limit: int) -> tuple[FileRecord | None, int, str | None]:
    """Decode the value at `position`: (record or None on a syntax error, end, error message)."""
    try:
        value, end = _decoder.raw_decode(text, position)
    except _DECODE_ERRORS as error:
        where = getattr(error, "pos", position)
        return None, position, (_bad_byte(text, position, where + 1) if dirty else None) or _not_json(error)
    problem = _bad_byte(text, position, end) if dirty else None
    if (
        problem is None
        and end - position > limit // 4
        and len(text[position:end].encode("utf-8", "surrogateescape")) > limit
    ):
        problem = _too_big(len(text[position:end].encode("utf-8", "surrogateescape")), limit)
    return FileRecord(0, None if problem else value, problem), end, None


def _json_records(data: bytes, limit: int) -> Iterator[FileRecord]:
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    try:
        text, dirty = data.decode("utf-8"), False
    except UnicodeDecodeError:
        # Keep going: a bad byte fails only the record it is in.
        text, dirty = data.decode("utf-8", "surrogateescape"), True
    del data
    lines = _Lines(text)
    position = _skip_whitespace(text, 0)
    if not text.startswith("[", position):
        record, end, error = _element(text, position, dirty, limit)
        if record is None:
            yield FileRecord(lines.at(position), error=error)
        elif _skip_whitespace(text, end) != len(text):
            yield FileRecord(lines.at(end), error="not JSON: extra data after the record")
        else:
            yield FileRecord(lines.at(position), record.value, record.error)
        return
    position = _skip_whitespace(text, position + 1)
    if text.startswith("]", position):
        return
    while True:
        record, end, error = _element(text, position, dirty, limit)
        if record is None:
            yield FileRecord(lines.at(position), error=f"{error}; rest of file skipped")
            return
        yield FileRecord(lines.at(position), record.value, record.error)
        position = _skip_whitespace(text, end)
        if text.startswith(",", position):
            position = _skip_whitespace(text, position + 1)
            continue
        if text.startswith("]", position) and _skip_whitespace(text, position + 1) == len(text):
            return
        yield FileRecord(lines.at(position), error="not JSON: expected ',' or the closing ']'; rest of file skipped")
        return


def read_turn_records(path: Path, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator[FileRecord]:
    """Yield the records of a `.json` or `.jsonl` file in order.

    A `.jsonl` file is streamed line by line (memory stays flat on large
    files); a `.json` file is read whole. Raises `TurnFileError` when the
    file cannot be opened or has another suffix. A record that is not JSON,
    not UTF-8 (with the byte and its offset in the file) or over
    `max_record_bytes` is yielded with its `error` and the line it starts on.
    """
    suffix = path.suffix.lower()
    if suffix not in (".json", ".jsonl"):
        raise TurnFileError(f"{path}: expected a .json or .jsonl file")
    try:
        if suffix == ".jsonl":
            with path.open("rb") as handle:
                yield from _jsonl_records(handle, max_record_bytes)
        else:
            yield from _json_records(path.read_bytes(), max_record_bytes)
    except OSError as error:
        raise TurnFileError(f"{path}: cannot read: {error.strerror or error}") from None


def count_lines(path: Path) -> int:
    """Number of lines of a file, for progress totals (0 when unreadable)."""
    try:
        with path.open("rb") as handle:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    except OSError:
        return 0
