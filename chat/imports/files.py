"""Reading turn records from `.json` and `.jsonl` files, with line numbers and byte offsets.

A `.json` file holds one record (an object) or a list of records; a `.jsonl`
file one record per line (blank lines are skipped). Every record comes with
the line it starts on, so an import can report `file:line: path: message`.

Both are streamed, so memory stays flat whatever the file's size: `.jsonl`
line by line, and a `.json` list value by value (`_Scanner` finds where each
value ends from its brackets and strings, reading a chunk at a time, and the
value's bytes are decoded as a `.jsonl` line is). The records' decoding is
the same for both formats. A bad byte (not UTF-8), a value that is not JSON
or a record over the size limit fails only its own record, with its line
and byte offset; in a `.json` list, a missing separator or a file that ends
inside a value ends that file (where the next record starts is unknowable),
earlier records still count. Our own scanner rather than a streaming parser
library: each record must keep the line it starts on and its own bytes (for
the byte offset of a bad byte and the size limit), which `ijson` does not
give; the records are then decoded exactly as `.jsonl` lines are
(bench/README.md, "import_turns").
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
_BOM = b"\xef\xbb\xbf"
# orjson reads integers past 64 bits as floats, silently; records holding
# such a literal (or anything orjson refuses) go through the stdlib decoder,
# which keeps them exact and words the refusals the way the tests expect.
# (A run of 19 digits is searched for as 19 zeros in the bytes mapped to
# zeros and spaces: several times faster than a regular expression.)
_DIGITS_TO_ZERO = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_DIGITS = b"0" * 19


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


def _decode(data: bytes, line: int, start: int) -> FileRecord:
    """One record's bytes (from byte `start` of the file, line `line`) as a `FileRecord`."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        return FileRecord(
            line, error=f"not UTF-8: byte 0x{data[error.start]:02x} at byte offset {start + error.start} of the file"
        )
    try:
        return FileRecord(line, _loads(data))
    except _DECODE_ERRORS as error:
        return FileRecord(line, error=_not_json(error))


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
            start += len(_BOM)
        if len(line) > limit + 1 or (len(line) == limit + 1 and not line.endswith(b"\n")):
            # Skip the rest of the over-long line without holding it.
            while line and not line.endswith(b"\n"):
                line = handle.readline(1 << 20)
                offset += len(line)
            yield FileRecord(number, error=_too_big(offset - start, limit))
            continue
        if not line.strip():
            continue
        yield _decode(line, number, start)


#: Bytes read from a `.json` file at a time.
CHUNK_BYTES = 1 << 20
# Everything up to the next bracket outside a string (group 1: the bracket),
# or up to a string that goes on past what was read (group 1: its quote), or
# to the end of what was read (group 1 empty): strings are skipped by the
# regular expression engine, not in Python.
_UP_TO_BRACKET = re.compile(rb'(?:[^"\[\]{}]+|"[^"\\]*(?:\\.[^"\\]*)*")*([\[\]{}"]|\Z)', re.S)
# A string from its opening quote (group 1: the closing quote, None if it goes on past what was read).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(")?', re.S)
_SPACE = re.compile(rb"[ \t\r\n]*")
_SCALAR_END = re.compile(rb"[,\]\s]")


class _StructureError(Exception):
    """Where the next record starts cannot be known: the rest of the file is skipped."""


class _Scanner:
    """The bytes of a `.json` file, read `CHUNK_BYTES` at a time, scanned forward value by value.

    It finds where a value ends by its brackets and strings alone, so a
    record is decoded from its own bytes, as a line of `.jsonl` is; it holds
    one chunk and the record being read (not even that for a record over
    the limit, which is skipped). Lines are counted as it goes.
    """

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.buf = b""
        self.base = 0  # offset in the file of buf[0]
        self.pos = 0  # scanning position in buf
        self.mark = 0  # buf[mark:] is kept when more is read
        self.line = 1  # the line of buf[counted]
        self.counted = 0
        self.eof = False

    def more(self) -> bool:
        """Read the next chunk (dropping what is before `mark`); False at the end of the file."""
        if self.eof:
            return False
        chunk = self.handle.read(CHUNK_BYTES)
        if not chunk:
            self.eof = True
            return False
        self.line += self.buf.count(b"\n", self.counted, self.mark)
        self.base += self.mark
        self.buf = self.buf[self.mark :] + chunk
        self.pos -= self.mark
        self.counted = 0
        self.mark = 0
        return True

    def line_at(self, position: int) -> int:
        self.line += self.buf.count(b"\n", self.counted, position)
        self.counted = position
        return self.line

    def peek(self) -> bytes:
        """The byte at the scanning position (b"" at the end of the file), after any whitespace."""
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]  # always matches
            if self.pos < len(self.buf):
                return self.buf[self.pos : self.pos + 1]
            self.mark = self.pos
            if not self.more():
                return b""

    def value(self, limit: int) -> tuple[bytes | None, int, int]:
        """Scan the value at the scanning position: (its bytes, or None past `limit`; its start in the file; its size).

        Raises `_StructureError` when the file ends inside it.
        """
        self.mark = self.pos
        start_in_file = self.base + self.pos
        first = self.buf[self.pos : self.pos + 1]
        if first in (b"[", b"{", b'"'):
            self._scan_brackets(limit, string_only=first == b'"')
        else:
            while (end := _SCALAR_END.search(self.buf, self.pos)) is None:
                self.pos = len(self.buf)
                if not self.more():
                    break
            self.pos = len(self.buf) if end is None else end.start()
        size = self.base + self.pos - start_in_file
        kept = start_in_file >= self.base  # not dropped while skipping a record over the limit
        data = self.buf[start_in_file - self.base : self.pos] if size <= limit and kept else None
        self.mark = self.pos
        return data, start_in_file, size

    def _scan_brackets(self, limit: int, *, string_only: bool) -> None:
        depth = 0
        start_in_file = self.base + self.pos
        while True:
            found = (_STRING if string_only else _UP_TO_BRACKET).match(self.buf, self.pos)
            assert found is not None  # it always matches, if only the end
            byte = found.group(1)
            if string_only and byte == b'"':
                self.pos = found.end()
                return
            if byte in (b"", b'"', None):
                # The end of what was read, or a string that goes on: read on.
                # A record over the limit is not kept while it is skipped.
                self.pos = found.start() if byte is None else found.start(1)
                if self.base + self.pos - start_in_file > limit:
                    self.mark = self.pos
                if not self.more():
                    raise _StructureError("not JSON: the file ends inside a record")
                continue
            self.pos = found.end()
            if byte in (b"[", b"{"):
                depth += 1
            else:
                depth -= 1
                if depth <= 0:
                    return


def _json_records(handle: IO[bytes], limit: int) -> Iterator[FileRecord]:
    scanner = _Scanner(handle)
    while len(scanner.buf) < len(_BOM) and scanner.more():
        pass
    if scanner.buf.startswith(_BOM):
        scanner.pos = len(_BOM)
    line = None  # the line the record being read starts on, once known
    try:
        first = scanner.peek()
        if first != b"[":
            # One record (or not JSON at all): the whole file is that value.
            line = scanner.line_at(scanner.pos)
            data, start, size = scanner.value(limit)
            if scanner.peek():
                yield FileRecord(scanner.line_at(scanner.pos), error="not JSON: extra data after the record")
            elif data is None:
                yield FileRecord(line, error=_too_big(size, limit))
            else:
                yield _decode(data, line, start)
            return
        scanner.pos += 1
        if scanner.peek() == b"]":
            scanner.pos += 1
        else:
            while True:
                scanner.peek()
                line = scanner.line_at(scanner.pos)
                data, start, size = scanner.value(limit)
                yield _decode(data, line, start) if data is not None else FileRecord(line, error=_too_big(size, limit))
                line = None
                separator = scanner.peek()
                scanner.pos += 1
                if separator == b",":
                    continue
                if separator == b"]":
                    break
                yield FileRecord(
                    scanner.line_at(scanner.pos - 1),
                    error="not JSON: expected ',' or the closing ']'; rest of file skipped",
                )
                return
        if scanner.peek():
            yield FileRecord(scanner.line_at(scanner.pos), error="not JSON: extra data after the list")
    except _StructureError as error:
        # The file ended inside a record: report it where that record starts (docs/running.md), not at the end.
        at = line if line is not None else scanner.line_at(min(scanner.pos, len(scanner.buf)))
        yield FileRecord(at, error=f"{error}; rest of file skipped")


def read_turn_records(path: Path, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator[FileRecord]:
    """Yield the records of a `.json` or `.jsonl` file in order.

    Both are streamed: a `.jsonl` file line by line, a `.json` list value by
    value (`_Scanner`), so memory stays flat on large files. Raises `TurnFileError` when the
    file cannot be opened or has another suffix. A record that is not JSON,
    not UTF-8 (with the byte and its offset in the file) or over
    `max_record_bytes` is yielded with its `error` and the line it starts on.
    """
    suffix = path.suffix.lower()
    if suffix not in (".json", ".jsonl"):
        raise TurnFileError(f"{path}: expected a .json or .jsonl file")
    try:
        with path.open("rb") as handle:
            yield from (_jsonl_records if suffix == ".jsonl" else _json_records)(handle, max_record_bytes)
    except OSError as error:
        raise TurnFileError(f"{path}: cannot read: {error.strerror or error}") from None


def count_lines(path: Path) -> int:
    """Number of lines of a file, for progress totals (0 when unreadable)."""
    try:
        with path.open("rb") as handle:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    except OSError:
        return 0
