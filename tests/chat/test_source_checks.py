"""`manage.py check_citation_sources` (SPEC 15, docs/support.md#sources-that-change): stored citations of library
documents by corpus path checked against the documents as they read now, in batches, writing nothing. Runs on
SQLite and on PostgreSQL (DATABASE_URL)."""

from __future__ import annotations

import io
import shutil

import pytest
from django.core.management import CommandError, call_command

from chat.models import ChatLog
from chat.services import record_turn
from chat.source_checks import GONE, check_citation_sources
from tests.factories import ChatLogFactory

pytestmark = pytest.mark.django_db

PRICING = "chase/sapphire-preferred/pricing.md"
SOURCE = f"silvia://credit-card-corpus/{PRICING}"


@pytest.fixture
def corpus(tmp_path, settings):
    """A copy of examples/corpus the test may change, as the corpus root."""
    root = tmp_path / "corpus"
    shutil.copytree(settings.BASE_DIR / "examples" / "corpus", root)
    settings.CITATION_CORPUS_ROOT = root
    return root


def _turn(n: int, content: str, cited: str) -> dict:
    """A turn that reads the Sapphire pricing document (its content as read then) and cites `cited` of it."""
    return {
        "id": f"5e0c1d2a-3b4c-4d5e-8f60-{n:012d}",
        "session": {"id": "5e0c1d2a-3b4c-4d5e-8f60-000000000000"},
        "user": "maya",
        "prompt_version": "v5",
        "user_message": f"fees {n}",
        "events": [
            {
                "type": "tool_call",
                "id": "toolu_1",
                "name": "read_credit_card_document",
                "input": {"path": PRICING},
                "output": {"path": PRICING, "content": content, "meta": None},
            },
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "text",
                            "text": "The fee is $95.",
                            "citations": [
                                {"type": "search_result_location", "source": SOURCE, "title": "p", "cited_text": cited}
                            ],
                        }
                    ],
                },
            },
        ],
    }


def _run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("check_citation_sources", *args, stdout=out, stderr=io.StringIO())
    except CommandError as error:
        return error.returncode, out.getvalue()
    return 0, out.getvalue()


def test_documents_that_changed_or_went_are_reported_and_nothing_is_written(corpus, maya):
    document = corpus / "credit-card-corpus" / PRICING
    content = document.read_text(encoding="utf-8")
    same = record_turn(_turn(1, content, "Annual fee: $95"))
    before = record_turn(_turn(2, content.replace("$95", "$0"), "Annual fee: $0"))  # cited an older text
    unsupported = record_turn(_turn(3, content, "Annual fee: $550"))  # its digest: the document's still
    old = ChatLogFactory.create(  # saved before support existed
        session=same.session,
        inline_citations=[
            {
                "source": SOURCE,
                "cited_text": "c",
                "start": 0,
                "end": 1,
                "target": {"kind": "card_document", "url": None},
            }
        ],
    )
    table = {log.pk: log.inline_citations for log in ChatLog.objects.all()}

    code, out = _run("--batch-size", "2")
    assert code == 1
    assert out.splitlines() == [
        f"changed {before.pk} inline citation 0  {SOURCE}",
        "rows 4, documents 1; citations checked 3: unchanged 2, changed 1, gone 0; without a digest 1",
    ]
    assert {log.pk: log.inline_citations for log in ChatLog.objects.all()} == table  # nothing written

    document.unlink()
    report = check_citation_sources(batch_size=1)
    cited = sorted([same, before, unsupported], key=lambda log: log.pk)  # the rows are read in key order
    assert [(f.outcome, f.log_id) for f in report.findings] == [(GONE, log.pk) for log in cited]
    assert report.findings[0].reason.startswith("corpus path 'chase/sapphire-preferred/pricing.md': no such document")
    assert (report.rows_scanned, report.checked, report.without_digest) == (4, 3, 1)
    assert old.pk not in {f.log_id for f in report.findings}


def test_all_unchanged_exits_0(corpus, maya):
    content = (corpus / "credit-card-corpus" / PRICING).read_text(encoding="utf-8")
    record_turn(_turn(1, content, "Annual fee: $95"))
    assert _run() == (
        0,
        "rows 1, documents 1; citations checked 1: unchanged 1, changed 0, gone 0; without a digest 0\n",
    )


def test_only_library_citations_by_path_are_checked(corpus, settings):
    # examples/turns cite documents by URL (their sidecars give one) and by path; rows, web pages and analyses too.
    call_command("import_turns", str(settings.BASE_DIR / "examples" / "turns"), create_users=True, stdout=io.StringIO())
    report = check_citation_sources()
    # By path: the Sapphire pricing (1.2), the IRA deadlines note (2.3), the escrow note (4.2): all unchanged.
    assert (report.checked, report.unchanged, report.findings) == (3, 3, [])
    assert report.documents == 3


def test_a_bad_batch_size_is_refused():
    with pytest.raises(CommandError, match="--batch-size must be a positive integer"):
        call_command("check_citation_sources", "--batch-size", "0")
    with pytest.raises(ValueError, match="batch_size must be positive"):
        check_citation_sources(batch_size=0)
