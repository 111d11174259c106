"""`manage.py backfill_citation_targets` and the data migration, end to end (docs/backfill.md)."""

from __future__ import annotations

import ast
import importlib
import io
import uuid
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.operations import RunPython

from chat import backfill as backfill_module
from chat.backfill import text as backfill_text
from chat.models import ChatLog
from chat.selectors import chat_logs_with_citation_counts
from tests.cases import load_cases
from tests.factories import ChatLogFactory

pytestmark = pytest.mark.django_db
MIGRATION = importlib.import_module("chat.migrations.0002_backfill_citation_targets")
BACKFILL_VECTORS = load_cases("backfill.json")
FROZEN = importlib.import_module("chat.migrations._frozen_0002_backfill")


def _id(n: int) -> uuid.UUID:
    return uuid.UUID(f"00000000-0000-4000-8000-{n:012d}")


def _old(n: int, *sources: str) -> ChatLog:
    citations = [{"source": s, "title": "t", "cited_text": f"c{i}"} for i, s in enumerate(sources)]
    return ChatLogFactory.create(
        id=_id(n), citations=citations, inline_citations=[{**c, "start": 0, "end": 1} for c in citations]
    )


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
    ChatLogFactory.create(id=_id(3))  # typed by the service
    ChatLogFactory.create(id=_id(4), citations=["[]"])  # a list holding a string: the constraint allows it

    code, out, err = _run("--batch-size", 2)

    assert code == 0, err
    assert out.splitlines() == [
        "rows scanned 4, changed 2",
        "citations and inline citations typed 6 (card_document 2, market_data 2, portfolio 2), "
        "already typed 2, left untyped 2",
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
    original = backfill_text.Progress.update

    def interrupt_after_first_batch(self, report):
        original(self, report)
        raise KeyboardInterrupt

    monkeypatch.setattr(backfill_text.Progress, "update", interrupt_after_first_batch)
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
    monkeypatch.setattr(backfill_text.sys, "stderr", terminal)
    for n in range(1, 4):
        _old(n, "silvia://analysis")

    code, _out, err = _run("--batch-size", 1)

    assert code == 0 and err == ""  # no plain lines: the bar has it
    bar = terminal.getvalue()
    assert "backfill: 100%" in bar and "3/3" in bar and "row/s" in bar and "changed=3" in bar


def test_progress_line_shows_rate_and_eta():
    report = backfill_module.BackfillReport(rows_scanned=250, rows_changed=100, last_id="x")
    assert (
        backfill_text.progress_line(report, 1000, 2.0)
        == "backfill: 250/1000 rows (25%), 100 changed, 125 rows/s, ETA 6s, after x"
    )


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


def test_the_migration_and_its_frozen_code_import_nothing_from_the_project():
    # Frozen history (docs/backfill.md): a later change to chat or citations
    # must not change what 0002 does.
    for module in (MIGRATION, FROZEN):
        assert module.__file__ is not None
        tree = ast.parse(Path(module.__file__).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        project = {name for name in imported if name and name.split(".")[0] in ("chat", "citations", "silvia")}
        assert project <= {"chat.migrations._frozen_0002_backfill"}, project


def _migrate_to(name: str):
    """Migrate the test database's `chat` app to `name` and return the apps of that state."""
    executor = MigrationExecutor(connection)
    target = [("chat", name)]
    executor.migrate(target)
    return MigrationExecutor(connection).loader.project_state(target[0]).apps


def _kind(expect) -> str:
    return "untyped" if expect in (None, "KEEP") else expect["kind"]


@pytest.mark.django_db(transaction=True)
def test_migration_types_old_rows_on_the_schema_of_its_time(monkeypatch):
    # The migration runs for real, from 0001 to 0002, on rows written with the
    # 0001 models: it must keep working whatever later migrations change.
    monkeypatch.setattr(FROZEN, "BATCH_SIZE", 3)  # several batches, one partly malformed
    apps = _migrate_to("0001_initial")
    try:
        user = apps.get_model("auth", "User").objects.create(username="old")
        session = apps.get_model("chat", "ChatSession").objects.create(user=user, title="old")
        old_log = apps.get_model("chat", "ChatLog")
        for n, case in enumerate(BACKFILL_VECTORS, start=1):
            citation = case["citation"]
            old_log.objects.create(
                id=_id(n), session=session, user=user, user_message="q", prompt_version="legacy",
                citations=[citation], inline_citations=[{**citation, "start": 0, "end": 1}],
            )  # fmt: skip
        malformed = _id(len(BACKFILL_VECTORS) + 1)
        analysis = {"source": "silvia://analysis", "title": "Analysis", "cited_text": "x"}
        old_log.objects.create(
            id=malformed, session=session, user=user, user_message="q", prompt_version="legacy",
            citations=[analysis], inline_citations=[None],
        )  # fmt: skip

        new_log = _migrate_to("0002_backfill_citation_targets").get_model("chat", "ChatLog")
        rows = {log.id: log for log in new_log.objects.all()}

        for n, case in enumerate(BACKFILL_VECTORS, start=1):
            citation, expect, log = case["citation"], case["expect"], rows[_id(n)]
            typed = {**citation, "target": expect} if expect not in (None, "KEEP") else citation
            assert (log.citations, log.inline_citations) == ([typed], [{**citation, "start": 0, "end": 1, **typed}])
            if expect not in (None, "KEEP"):  # rows that change get their summary columns
                assert (log.citation_count, log.typed_count, log.untyped_count, log.malformed_count) == (1, 1, 0, 0)
                assert (log.target_kinds, log.sources) == (f"|{_kind(expect)}|", citation["source"])
        assert (rows[malformed].citations, rows[malformed].inline_citations) == ([analysis], [None])
        assert rows[malformed].target_kinds == ""  # left whole: not even its summary was written
    finally:
        MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
