"""`manage.py backfill_citation_targets` and the data migration, end to end (SPEC section 12)."""
from __future__ import annotations

import importlib
import io
import uuid

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.operations import RunPython

from chat import backfill as backfill_module
from chat.management.commands import backfill_citation_targets as command_module
from chat.models import ChatLog
from chat.selectors import chat_logs_with_citation_counts
from tests.factories import ChatLogFactory

pytestmark = pytest.mark.django_db
MIGRATION = importlib.import_module("chat.migrations.0002_backfill_citation_targets")


def _id(n: int) -> uuid.UUID:
    return uuid.UUID(f"00000000-0000-4000-8000-{n:012d}")


def _old(n: int, *sources: str) -> ChatLog:
    citations = [{"source": s, "title": "t", "cited_text": f"c{i}"} for i, s in enumerate(sources)]
    return ChatLogFactory(id=_id(n), citations=citations, inline_citations=[{**c, "start": 0, "end": 1} for c in citations])


def _run(*args):
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command("backfill_citation_targets", *map(str, args), stdout=out, stderr=err)
    except CommandError as error:
        code = error.returncode
        err.write(str(error))
    return code, out.getvalue(), err.getvalue()


def _table():
    return {log.id: (log.citations, log.inline_citations) for log in ChatLog.objects.order_by("id")}


def test_report_counts_rows_kinds_and_malformed_ids():
    _old(1, "silvia://your-portfolio", "silvia://market-data/finnhub/msft", "https://example.org/")
    _old(2, "silvia://credit-card-corpus/chase/freedom.md")
    ChatLogFactory(id=_id(3))  # typed by the service
    ChatLogFactory(id=_id(4), citations=["[]"])  # a list holding a string: the constraint allows it

    code, out, err = _run("--batch-size", 2)

    assert code == 0, err
    assert out.splitlines() == [
        "rows scanned 4, changed 2",
        "citations and inline citations typed 6 (card_document 2, market_data 2, portfolio 2), already typed 2, left untyped 2",
        "malformed rows skipped 1",
        f"  {_id(4)}: citations holds a non-object",
    ]
    # No terminal under pytest: plain progress lines, the last one at the end.
    assert err.splitlines()[-1].startswith("backfill: 4/4 rows (100%), 2 changed, ")
    assert err.splitlines()[-1].endswith(f"after {_id(4)}")
    assert ChatLog.objects.get(pk=_id(2)).citations[0]["target"] == {"kind": "card_document", "url": None}


def test_second_run_changes_nothing():
    _old(1, "silvia://analysis")
    _run()
    before = _table()

    code, out, _ = _run()

    assert code == 0
    assert out.splitlines()[:2] == [
        "rows scanned 1, changed 0",
        "citations and inline citations typed 0 (none), already typed 2, left untyped 0",
    ]
    assert _table() == before


def test_dry_run_writes_nothing():
    _old(1, "silvia://analysis")
    before = _table()

    code, out, err = _run("--dry-run")

    assert code == 0
    assert out.splitlines()[0] == "DRY RUN: nothing written. rows scanned 1, would change 1"
    assert "1 would change" in err
    assert _table() == before


def test_after_starts_after_that_id():
    _old(1, "silvia://analysis")
    _old(2, "silvia://analysis")

    code, out, _ = _run("--after", _id(1))

    assert code == 0 and out.startswith("rows scanned 1, changed 1")
    assert "target" not in ChatLog.objects.get(pk=_id(1)).citations[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--after", "42"), "--after must be an ai_chat_logs id (a UUID), not '42'"),
        (("--batch-size", 0), "--batch-size must be a positive integer, not 0"),
        (("--batch-size", -5), "--batch-size must be a positive integer, not -5"),
    ],
)
def test_bad_arguments_are_a_clear_error(args, message):
    _old(1, "silvia://analysis")

    code, out, err = _run(*args)

    assert (code, out) == (1, "")
    assert message in err
    assert "target" not in ChatLog.objects.get(pk=_id(1)).citations[0]


def test_interrupted_run_says_how_to_resume_and_a_rerun_finishes(monkeypatch):
    for n in range(1, 6):
        _old(n, "silvia://analysis")
    original = command_module._Progress.update

    def interrupt_after_first_batch(self, report):
        original(self, report)
        raise KeyboardInterrupt

    monkeypatch.setattr(command_module._Progress, "update", interrupt_after_first_batch)
    code, out, err = _run("--batch-size", 2)

    assert code == 130
    assert out.splitlines()[0] == "rows scanned 2, changed 2"
    assert f"stopped after {_id(2)}" in out
    assert f"Resume with: backfill_citation_targets --after {_id(2)}" in err
    assert chat_logs_with_citation_counts().filter(typed_total=1).count() == 2

    monkeypatch.undo()
    code, out, _ = _run("--batch-size", 2)
    assert code == 0 and out.startswith("rows scanned 5, changed 3")
    assert chat_logs_with_citation_counts().filter(typed_total=1).count() == 5


def test_progress_bar_on_a_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(command_module.sys, "stderr", terminal)
    for n in range(1, 4):
        _old(n, "silvia://analysis")

    code, out, err = _run("--batch-size", 1)

    assert code == 0 and err == ""  # no plain lines: the bar has it
    bar = terminal.getvalue()
    assert "backfill: 100%" in bar and "3/3" in bar and "row/s" in bar and "changed=3" in bar


def test_progress_line_shows_rate_and_eta():
    report = backfill_module.BackfillReport(rows_scanned=250, rows_changed=100, last_id="x")
    assert command_module.progress_line(report, 1000, 2.0) == "backfill: 250/1000 rows (25%), 100 changed, 125 rows/s, ETA 6s, after x"


# --- the data migration ----------------------------------------------------------


def test_migration_is_a_non_atomic_elidable_runpython_with_noop_reverse():
    migration = MIGRATION.Migration
    assert migration.atomic is False
    [operation] = migration.operations
    assert isinstance(operation, RunPython)
    assert operation.elidable and operation.reverse_code is RunPython.noop
    assert operation.code is MIGRATION.backfill_targets


def _historical_apps():
    return MigrationExecutor(connection).loader.project_state(("chat", "0002_backfill_citation_targets")).apps


def test_migration_calls_the_command_function_with_the_historical_model(monkeypatch):
    calls = []
    monkeypatch.setattr(backfill_module, "backfill_citation_targets", lambda **kwargs: calls.append(kwargs) or backfill_module.BackfillReport())
    apps = _historical_apps()

    MIGRATION.backfill_targets(apps, connection.schema_editor())

    [kwargs] = calls
    assert kwargs["model"] is apps.get_model("chat", "ChatLog")
    assert kwargs["model"] is not ChatLog
    assert kwargs["using"] == connection.alias


def test_migration_types_rows_as_the_command_does():
    _old(1, "silvia://your-portfolio", "silvia://your-account/x")
    MIGRATION.backfill_targets(_historical_apps(), connection.schema_editor())
    _old(2, "silvia://your-portfolio", "silvia://your-account/x")  # the same row, after the migration ran
    _run()

    migrated, commanded = ChatLog.objects.get(pk=_id(1)), ChatLog.objects.get(pk=_id(2))
    assert migrated.citations == commanded.citations and migrated.inline_citations == commanded.inline_citations
    assert migrated.citations[0]["target"] == {"kind": "portfolio"} and "target" not in migrated.citations[1]
    counted = chat_logs_with_citation_counts().in_bulk([_id(1), _id(2)])
    assert [(counted[i].typed_total, counted[i].untyped_total) for i in (_id(1), _id(2))] == [(1, 1), (1, 1)]
