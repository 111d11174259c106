"""`chat.imports.files`: a `.json` list read as a stream, value by value (docs/running.md#importing-turns).

The scanner must find each record's bytes and the line it starts on
whatever the chunk boundaries cut: every test here also runs with chunks of
a few bytes, so values, strings and escapes are split everywhere.
"""

from __future__ import annotations

import json

import pytest

from chat.imports import files as turn_files
from chat.imports.files import read_turn_records

RECORDS = [
    {"n": 1, "text": 'a "quoted" [bracket] {brace} \\ back\\slash', "list": [1, [2, {"x": "]"}]]},
    {"n": 2, "text": "日本 💳 \u2028 é", "empty": {}, "more": []},
    {"n": 3, "deep": [[[{"a": "}}}"}]]], "number": 12345678901234567890123},
]


@pytest.fixture(params=[turn_files.CHUNK_BYTES, 1, 3, 7], ids=lambda n: f"chunks of {n} bytes")
def chunk(request, monkeypatch):
    monkeypatch.setattr(turn_files, "CHUNK_BYTES", request.param)
    return request.param


def _read(tmp_path, text: str | bytes, **kwargs):
    path = tmp_path / "turns.json"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return [(r.line, r.value, r.error) for r in read_turn_records(path, **kwargs)]


def test_each_record_comes_whole_with_the_line_it_starts_on(tmp_path, chunk):
    text = json.dumps(RECORDS, indent=2, ensure_ascii=False)
    # Lines are counted by "\n" only (a raw U+2028 in a string is no line break for the import).
    starts = [n for n, line in enumerate(text.split("\n"), start=1) if line == "  {"]
    assert _read(tmp_path, text) == [(line, record, None) for line, record in zip(starts, RECORDS, strict=True)]


def test_a_compact_list_and_a_single_record(tmp_path, chunk):
    assert _read(tmp_path, json.dumps(RECORDS)) == [(1, r, None) for r in RECORDS]
    assert _read(tmp_path, "\n\n" + json.dumps(RECORDS[0]) + "\n") == [(3, RECORDS[0], None)]
    assert _read(tmp_path, " [ ] ") == []


def test_a_record_over_the_limit_is_skipped_and_the_next_one_read(tmp_path, chunk):
    big = {"n": 2, "text": "x" * 500}
    text = json.dumps([RECORDS[0], big, RECORDS[2]])
    size = len(json.dumps(big).encode())
    got = _read(tmp_path, text, max_record_bytes=400)
    assert got == [
        (1, RECORDS[0], None),
        (1, None, f"record of {size} bytes is over the limit of 400 bytes (--max-record-bytes)"),
        (1, RECORDS[2], None),
    ]


def test_a_bad_byte_fails_its_record_with_its_offset_in_the_file(tmp_path, chunk):
    data = json.dumps([RECORDS[0], {"n": 2, "text": "BAD"}, RECORDS[2]], ensure_ascii=False).encode()
    data = data.replace(b"BAD", b"B\xffD")
    got = _read(tmp_path, data)
    assert got[0] == (1, RECORDS[0], None) and got[2] == (1, RECORDS[2], None)
    offset = data.index(b"\xff")
    assert got[1] == (1, None, f"not UTF-8: byte 0xff at byte offset {offset} of the file")


def test_a_record_that_is_not_json_fails_alone(tmp_path, chunk):
    got = _read(tmp_path, '[{"n": 1}, {"n": NaN}, {"n": 3}]')
    assert got[0] == (1, {"n": 1}, None) and got[2] == (1, {"n": 3}, None)
    assert got[1][:2] == (1, None) and "NaN is not JSON" in got[1][2]


@pytest.mark.parametrize(
    ("text", "line", "error"),
    [
        ('[{"n": 1}\n {"n": 2}]', 2, "not JSON: expected ',' or the closing ']'; rest of file skipped"),
        ('[{"n": 1},\n {"n": "open', 2, "not JSON: the file ends inside a record; rest of file skipped"),
        ('[{"n": 1}]\nmore', 2, "not JSON: extra data after the list"),
        ('{"n": 1}\n{"n": 2}', 2, "not JSON: extra data after the record"),
    ],
)
def test_where_the_next_record_starts_is_unknowable_the_rest_is_skipped(tmp_path, chunk, text, line, error):
    got = _read(tmp_path, text)
    assert got[-1] == (line, None, error)
    if text.startswith("["):
        assert got[0] == (1, {"n": 1}, None)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('[{"n": 1},\n {"n": 2,\n  "text": "a",\n  "more": [1,\n', 2),  # ends inside a list of the record
        ('[{"n": 1},\n\n\n {"n": 2,\n  "text": "open', 4),  # ends inside a string of the record
        ('\n{"n": 1,\n "more": {\n', 2),  # a single record
    ],
)
def test_a_file_that_ends_inside_a_record_names_the_line_the_record_starts_on(tmp_path, chunk, text, line):
    assert _read(tmp_path, text)[-1] == (line, None, "not JSON: the file ends inside a record; rest of file skipped")


def test_a_byte_order_mark_is_skipped_and_offsets_count_it(tmp_path, chunk):
    data = b"\xef\xbb\xbf" + json.dumps([{"n": "B\xff"}], ensure_ascii=False).encode("latin-1")
    offset = data.index(b"\xff")
    assert _read(tmp_path, data) == [(1, None, f"not UTF-8: byte 0xff at byte offset {offset} of the file")]
