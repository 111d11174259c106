"""`import_turns` in batches: bad bytes and lines, limits, repeats in a batch, parallel runs (issues 13 and 14)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from chat.models import ChatLog, ChatSession
from tests.chat.test_import_turns import _record, _run

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def _line(n, **extra):
    return json.dumps(_record(n, **extra)).encode() + b"\n"


def test_a_bad_byte_in_a_jsonl_fails_only_its_own_line_with_its_offset(tmp_path, maya):
    lines = [_line(n) for n in range(1, 31)]
    broken = lines[14].replace(b"question 15", b"question \xff5")
    lines[14] = broken
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(b"".join(lines))
    offset = sum(len(line) for line in lines[:14]) + broken.index(b"\xff")

    code, out, err = _run(path, batch_size=4)

    assert code == 1
    assert f"{path}:15: not UTF-8: byte 0xff at byte offset {offset} of the file" in err
    assert "imported 29, skipped 0, failed 1" in out
    assert ChatLog.objects.count() == 29


def test_a_bad_byte_in_a_json_list_fails_only_its_record(tmp_path, maya):
    text = json.dumps([_record(1), _record(2), _record(3)], indent=2).encode()
    broken = text.replace(b"question 2", b"question \xc32")
    path = tmp_path / "list.json"
    path.write_bytes(broken)
    offset = broken.index(b"\xc3")
    record_start = [n for n, line in enumerate(broken.split(b"\n"), start=1) if line == b"  {"][1]

    code, out, err = _run(path)

    assert code == 1, err
    assert f"{path}:{record_start}: not UTF-8: byte 0xc3 at byte offset {offset} of the file" in err
    assert "imported 2, skipped 0, failed 1" in out


def test_a_json_list_of_many_records_reports_each_start_line(tmp_path, maya):
    records = [_record(n) for n in range(1, 301)]
    records[250]["user_message"] = 7
    path = tmp_path / "many.json"
    path.write_text(json.dumps(records, indent=1))
    starts = [n for n, line in enumerate(path.read_text().splitlines(), start=1) if line == " {"]

    code, out, err = _run(path, batch_size=64)

    assert code == 1
    assert err.splitlines()[0] == f"{path}:{starts[250]}: user_message: expected a string, got a number"
    assert "imported 299, skipped 0, failed 1" in out


@pytest.mark.parametrize(
    ("options", "mutate", "message"),
    [
        (
            {"max_record_bytes": 2000},
            lambda r: r.update(user_message="x" * 3000),
            "over the limit of 2000 bytes (--max-record-bytes)",
        ),
        (
            {"max_text_chars": 10},
            lambda r: r.update(user_message="x" * 11),
            "user_message: 11 characters, over the limit of 10 (TURN_MAX_TEXT_CHARS)",
        ),
        (
            {"max_tool_rows": 2},
            lambda r: r["events"].insert(
                0,
                {
                    "type": "tool_call",
                    "id": "s",
                    "name": "execute_sql",
                    "input": {"query": "q"},
                    "output": {"rows": [{"a": 1}] * 3},
                },
            ),
            "events[0].output.rows: 3 rows, over the limit of 2 (TURN_MAX_TOOL_ROWS)",
        ),
    ],
)
@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_limits_refuse_only_the_record_over_them_and_name_the_limit(tmp_path, maya, options, mutate, message, suffix):
    big = _record(2)
    mutate(big)
    records = [_record(1), big, _record(3)]
    path = tmp_path / f"limits{suffix}"
    path.write_text("".join(json.dumps(r) + "\n" for r in records) if suffix == ".jsonl" else json.dumps(records))

    code, out, err = _run(path, **options)

    assert code == 1
    assert message in err
    assert "imported 2, skipped 0, failed 1" in out


def test_the_answer_length_limit_names_it(tmp_path, maya):
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(_record(1) | {"user_message": "q"}))  # the answer is "One." (4 characters)
    code, _, err = _run(path, max_text_chars=3)
    assert code == 1 and "events: the answer has 4 characters, over the limit of 3 (TURN_MAX_TEXT_CHARS)" in err


def test_refusals_inside_a_batch_leave_its_other_records_written(tmp_path, maya, other_user):
    theirs = _record(90, user="sam")
    theirs["session"]["id"] = "99999999-2222-4333-8444-555555555555"
    assert _run(_write(tmp_path / "sam.json", [theirs]))[0] == 0
    claim_session = _record(2)
    claim_session["session"]["id"] = theirs["session"]["id"]
    claim_turn = _record(90)  # sam's turn id, maya's session
    repeat = _record(1)  # the same id twice in one batch: the second is a skip
    records = [_record(1), claim_session, claim_turn, repeat, _record(3)]

    code, out, err = _run(_write(tmp_path / "mixed.json", records), batch_size=10)

    assert code == 1
    assert "session.id: session 99999999-2222-4333-8444-555555555555 belongs to another user" in err
    assert "id: turn 00000000-0000-4000-8000-000000000090 belongs to another user" in err
    assert "imported 2, skipped 1, failed 2" in out
    assert set(ChatLog.objects.filter(user__username="maya").values_list("user_message", flat=True)) == {
        "question 1",
        "question 3",
    }
    assert ChatSession.objects.get(pk=theirs["session"]["id"]).user == other_user
    assert ChatLog.objects.filter(session_id=theirs["session"]["id"]).count() == 1


def test_a_session_claimed_by_two_users_in_one_batch_goes_to_the_first(tmp_path, maya, other_user):
    first, second = _record(1), _record(2, user="sam")
    code, _, err = _run(_write(tmp_path / "two.json", [first, second]), batch_size=10)
    assert code == 1 and "session.id: session 11111111-2222-4333-8444-555555555555 belongs to another user" in err
    assert ChatSession.objects.get().user == maya and ChatLog.objects.get().user == maya


def test_batches_keep_the_session_rules(tmp_path, maya):
    early, late, untitled = (
        _record(1, created_at="2026-11-01T00:00:00Z"),
        _record(2, created_at="2026-11-09T00:00:00Z"),
        _record(3),
    )
    late["session"]["title"] = "Second title"
    early["session"]["title"] = ""
    untitled["created_at"] = "2026-11-05T00:00:00Z"
    assert _run(_write(tmp_path / "a.json", [early, late]), batch_size=10)[0] == 0
    assert (
        _run(_write(tmp_path / "b.json", [untitled | {"session": {"id": early["session"]["id"], "title": "Third"}}]))[0]
        == 0
    )
    session = ChatSession.objects.get()
    assert session.title == "Second title"  # the first non-empty title given is kept
    assert (session.created_at.day, session.updated_at.day) == (1, 9)


def _write(path, records):
    path.write_text(json.dumps(records))
    return path


@pytest.mark.django_db(transaction=True)
def test_four_parallel_imports_creating_users_refuse_nothing(tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers: PostgreSQL only (SQLite allows one writer at a time)")
    records = [_record(n, user=f"new{n % 5}") for n in range(40)]
    for n, record in enumerate(records):
        record["session"]["id"] = f"11111111-2222-4333-8444-{n % 5:012d}"
    path = _write(tmp_path / "shared.json", records)
    settings = connection.settings_dict
    url = (
        f"postgres://{settings['USER']}@{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}/{settings['NAME']}"
    )
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "silvia.settings"}
    command = [sys.executable, "manage.py", "import_turns", str(path), "--create-users", "--batch-size", "3"]
    runs = [
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    results = [(*run.communicate(timeout=120), run.returncode) for run in runs]

    for out, err, code in results:
        assert code == 0, err
        assert "failed 0" in out
    assert sum(int(out.split("imported ")[1].split(",")[0]) for out, _, _ in results) == 40
    assert ChatLog.objects.count() == 40 and ChatSession.objects.count() == 5
    assert get_user_model().objects.filter(username__startswith="new").count() == 5
