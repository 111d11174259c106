"""`manage.py import_turns` end to end, on real files and the real database."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from chat.models import ChatLog, ChatSession
from tests.cases import load_cases

pytestmark = pytest.mark.django_db
TURNS = load_cases("turns.json", shared=False)  # counted and indexed below


def _run(*args, **options):
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command("import_turns", *map(str, args), stdout=out, stderr=err, **options)
    except CommandError as error:
        code = error.returncode
        err.write(str(error))
    return code, out.getvalue(), err.getvalue()


def _record(n, user="maya", **extra):
    return {
        "id": f"00000000-0000-4000-8000-{n:012d}",
        "session": {"id": "11111111-2222-4333-8444-555555555555"},
        "user": user,
        "prompt_version": "v5",
        "user_message": f"question {n}",
        "events": [
            {
                "type": "tool_call",
                "id": "t",
                "name": "execute_python",
                "input": {"code": "print(1)"},
                "output": {"stdout": "1\n", "stderr": ""},
            },
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "text",
                            "text": "One.",
                            "citations": [
                                {
                                    "type": "search_result_location",
                                    "source": "silvia://analysis",
                                    "title": "Analysis",
                                    "cited_text": "1",
                                }
                            ],
                        }
                    ],
                },
            },
        ],
        **extra,
    }


def test_imports_golden_turns_and_summarises(tmp_path, maya):
    path = tmp_path / "turns.json"
    path.write_text(json.dumps([case["record"] for case in TURNS]))

    code, out, err = _run(path)

    assert code == 0, err
    assert ChatLog.objects.count() == len(TURNS)
    # Summary citations of the 4 golden turns: account 2, accounts 2, analysis 1,
    # portfolio 1, market_data 1; untyped: the p590a URL, checking (turn 3), brokerage.
    assert out.strip().splitlines()[-1] == (
        "imported 4, skipped 0, failed 0; citations typed 7 "
        "(account 2, accounts 2, analysis 1, market_data 1, portfolio 1), untyped 3"
    )


def test_second_import_skips_everything(tmp_path, maya):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(_record(n)) for n in range(3)) + "\n")
    assert _run(path)[0] == 0
    code, out, _ = _run(path)
    assert code == 0
    assert out.strip().endswith("imported 0, skipped 3, failed 0; citations typed 0 (none), untyped 0")
    assert ChatLog.objects.count() == 3


def test_bad_records_are_reported_with_file_line_and_path_and_others_imported(tmp_path, maya):
    bad = _record(2)
    bad["events"][0]["output"]["stdout"] = 7
    lines = [json.dumps(_record(1)), "", "{not json", json.dumps(bad), json.dumps(_record(3))]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")

    code, out, err = _run(path)

    assert code == 1
    assert f"{path}:3: not JSON" in err
    assert f"{path}:4: events[0].output.stdout: expected a string, got a number" in err
    assert "imported 2, skipped 0, failed 2; citations typed 2 (analysis 2), untyped 0" in out
    assert ChatLog.objects.count() == 2


def test_json_list_reports_the_line_each_record_starts_on(tmp_path, maya):
    bad = _record(2)
    del bad["user_message"]
    path = tmp_path / "list.json"
    path.write_text(json.dumps([_record(1), bad], indent=2))
    record_starts = [n for n, line in enumerate(path.read_text().splitlines(), start=1) if line == "  {"]
    start_of_second = record_starts[1]

    code, _, err = _run(path)

    assert code == 1
    assert f"{path}:{start_of_second}: user_message: missing (expected a string)" in err
    assert ChatLog.objects.count() == 1


def test_unknown_user_fails_unless_create_users(tmp_path, db):
    path = tmp_path / "one.json"
    path.write_text(json.dumps(_record(1, user="newcomer")))

    code, _, err = _run(path)
    assert code == 1 and "user: no user named 'newcomer'" in err
    assert not get_user_model().objects.filter(username="newcomer").exists()

    code, out, _ = _run(path, create_users=True)
    assert code == 0 and "imported 1" in out
    assert ChatLog.objects.get().user.username == "newcomer"


def test_user_override(tmp_path, maya, other_user):
    path = tmp_path / "one.json"
    path.write_text(json.dumps(_record(1, user="ghost")))
    assert _run(path, user="sam")[0] == 0
    assert ChatSession.objects.get().user == other_user


def test_unknown_override_user_is_an_error(tmp_path, db):
    path = tmp_path / "one.json"
    path.write_text(json.dumps(_record(1)))
    code, _, err = _run(path, user="ghost")
    assert code == 1 and "--user: no user named 'ghost'" in err
    assert ChatLog.objects.count() == 0


def test_a_record_refused_after_user_creation_leaves_no_user(tmp_path, maya):
    path = tmp_path / "two.jsonl"
    theirs = _record(1)  # maya's session...
    intruder = _record(2, user="mallory")  # ...claimed by a new user
    path.write_text(json.dumps(theirs) + "\n" + json.dumps(intruder) + "\n")
    code, _, err = _run(path, create_users=True)
    assert code == 1 and "session.id: session" in err
    assert not get_user_model().objects.filter(username="mallory").exists()


def test_missing_file_and_wrong_suffix_and_bad_utf8(tmp_path, maya):
    code, _, err = _run(tmp_path / "nope.json")
    assert code == 1 and "no such file" in err
    other = tmp_path / "turns.txt"
    other.write_text("{}")
    code, _, err = _run(other)
    assert code == 1 and "expected a .json or .jsonl file" in err
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe{")
    code, _, err = _run(binary)
    assert code == 1 and "not UTF-8" in err


def test_folder_imports_its_json_files(tmp_path, maya):
    (tmp_path / "a.json").write_text(json.dumps(_record(1)))
    (tmp_path / "b.jsonl").write_text(json.dumps(_record(2)) + "\n")
    (tmp_path / "notes.md").write_text("ignored")
    code, out, _ = _run(tmp_path)
    assert code == 0 and "imported 2" in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"n": ' + "9" * 5000 + "}", "not JSON: Exceeds the limit"),
        ("[" * 100_000 + "]" * 100_000, "not JSON: nested too deeply to read"),
        ('{"x": NaN}', "not JSON: NaN is not JSON"),
        ('{"x": -Infinity}', "not JSON: -Infinity is not JSON"),
    ],
)
@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_values_python_cannot_or_should_not_decode_are_reported(tmp_path, maya, text, message, suffix):
    path = tmp_path / f"odd{suffix}"
    path.write_text(text + "\n")
    code, out, err = _run(path)
    assert code == 1
    assert f"{path}:1: {message}" in err
    assert "Traceback" not in err
    assert "failed 1" in out


def test_a_byte_order_mark_is_not_part_of_the_json(tmp_path, maya):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_record(1)).encode())
    jsonl = tmp_path / "bom.jsonl"
    jsonl.write_bytes(b"\xef\xbb\xbf" + json.dumps(_record(2)).encode() + b"\n")
    code, _out, err = _run(path, jsonl)
    assert code == 0, err
    assert ChatLog.objects.count() == 2


def test_a_bad_file_does_not_stop_the_others(tmp_path, maya):
    bad = tmp_path / "a.json"
    bad.write_text('{"n": ' + "9" * 5000 + "}")
    good = tmp_path / "b.json"
    good.write_text(json.dumps(_record(1)))
    code, out, _ = _run(bad, good)
    assert code == 1 and "imported 1, skipped 0, failed 1" in out


def test_text_the_database_cannot_store_is_refused_on_both_databases(tmp_path, maya):
    record = _record(1)
    record["user_message"] = "nul \u0000 inside"
    path = tmp_path / "nul.json"
    path.write_text(json.dumps(record))
    code, _, err = _run(path)
    assert code == 1
    assert f"{path}:1: user_message: contains a NUL character" in err
    assert ChatLog.objects.count() == 0 and ChatSession.objects.count() == 0


def test_created_at_past_year_9999_in_utc_is_refused(tmp_path, maya):
    path = tmp_path / "late.json"
    path.write_text(json.dumps(_record(1, created_at="9999-12-31T23:59:59-05:00")))
    code, _, err = _run(path)
    assert code == 1 and f"{path}:1: created_at: out of range once in UTC" in err
    assert ChatLog.objects.count() == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"user": ""}, "--user: expected a username, got an empty string"),
        ({"user": "x" * 200, "create_users": True}, "--user: cannot create user"),
        ({"user": "bad name!", "create_users": True}, "--user: cannot create user 'bad name!'"),
    ],
)
def test_usernames_are_checked_before_a_user_is_created(tmp_path, db, options, message):
    path = tmp_path / "one.json"
    path.write_text(json.dumps(_record(1)))
    code, _, err = _run(path, **options)
    assert code == 1 and message in err
    assert get_user_model().objects.count() == 0


def test_citation_types_not_recorded_are_counted_in_the_summary(tmp_path, maya):
    # docs/turns.md#what-a-turn-stores: a char_location citation is not stored, but reported by type.
    record = _record(7)
    citations = record["events"][1]["message"]["content"][0]["citations"]
    citations.append(
        {"type": "char_location", "cited_text": "x", "document_index": 0, "start_char_index": 0, "end_char_index": 1}
    )
    citations.append(
        {"type": "char_location", "cited_text": "y", "document_index": 0, "start_char_index": 1, "end_char_index": 2}
    )
    path = tmp_path / "t.json"
    path.write_text(json.dumps(record))
    code, out, _ = _run(path)
    assert code == 0
    assert out.strip().endswith("; citations not recorded 2 (char_location 2)")
    assert len(ChatLog.objects.get().inline_citations) == 1
