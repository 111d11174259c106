"""The library corpus reader (docs/citable.md): pure, on tmp_path, no database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citations.corpus import CORPUS_FOLDERS, CorpusPathError, read_corpus_document

EXAMPLES_CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A corpus root with one document per folder and a secret file beside it."""
    corpus = tmp_path / "corpus"
    tax = corpus / "tax-authority" / "irs"
    tax.mkdir(parents=True)
    (tax / "p590a.md").write_text("IRA limit: $7,500.\r\nCatch-up: $1,100.\n", encoding="utf-8")
    (tax / "p590a.md.meta.json").write_text(
        json.dumps({"source_url": "https://www.irs.gov/publications/p590a", "title": "Publication 590-A"}),
        encoding="utf-8",
    )
    (tax / "bare.md").write_text("No sidecar here.", encoding="utf-8")
    (corpus / "credit-card-corpus").mkdir()
    (corpus / "credit-card-corpus" / "terms.md").write_text("Annual fee: $95 💳", encoding="utf-8")
    (corpus / "mortgage-code").mkdir()
    (corpus / "mortgage-code" / "1026.43.xml").write_text("<SECTION>§ 1026.43</SECTION>", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("not for the model", encoding="utf-8")
    return corpus


def test_reads_document_with_sidecar(root):
    document = read_corpus_document("read_tax_authority", "irs/p590a.md", root=root)
    assert document == {
        "path": "irs/p590a.md",
        "content": "IRA limit: $7,500.\r\nCatch-up: $1,100.\n",  # exact text, line endings kept
        "meta": {"source_url": "https://www.irs.gov/publications/p590a", "title": "Publication 590-A"},
    }


def test_document_without_sidecar_has_no_meta(root):
    document = read_corpus_document("read_tax_authority", "irs/bare.md", root=root)
    assert document == {"path": "irs/bare.md", "content": "No sidecar here.", "meta": None}


@pytest.mark.parametrize(
    "sidecar",
    [
        "{not json",
        "[1, 2]",
        '"a string"',
        "null",
        b"\xff\xfe not utf-8",
    ],
    ids=["malformed", "list", "string", "null", "not-utf8"],
)
def test_sidecar_that_is_not_a_json_object_gives_no_meta(root, sidecar):
    target = root / "tax-authority" / "irs" / "bare.md.meta.json"
    if isinstance(sidecar, bytes):
        target.write_bytes(sidecar)
    else:
        target.write_text(sidecar, encoding="utf-8")
    assert read_corpus_document("read_tax_authority", "irs/bare.md", root=root)["meta"] is None


def test_sidecar_linking_outside_the_folder_is_ignored(root, tmp_path):
    outside = tmp_path / "meta.json"
    outside.write_text('{"title": "leaked"}', encoding="utf-8")
    (root / "tax-authority" / "irs" / "bare.md.meta.json").symlink_to(outside)
    assert read_corpus_document("read_tax_authority", "irs/bare.md", root=root)["meta"] is None


def test_each_reader_reads_its_own_folder(root):
    assert read_corpus_document("read_credit_card_document", "terms.md", root=root)["content"] == "Annual fee: $95 💳"
    assert read_corpus_document("read_mortgage_authority", "1026.43.xml", root=root)["content"].startswith("<SECTION>")
    with pytest.raises(CorpusPathError, match=r"terms\.md"):
        read_corpus_document("read_tax_authority", "terms.md", root=root)


@pytest.mark.parametrize(
    ("given", "normalised"),
    [("./irs/p590a.md", "irs/p590a.md"), ("irs//p590a.md", "irs/p590a.md"), ("irs/../irs/p590a.md", "irs/p590a.md")],
)
def test_path_is_normalised(root, given, normalised):
    assert read_corpus_document("read_tax_authority", given, root=root)["path"] == normalised


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "is empty"),
        ("../secret.txt", "leaves the corpus folder"),
        ("../../secret.txt", "leaves the corpus folder"),
        ("irs/../../credit-card-corpus/terms.md", "leaves the corpus folder"),
        ("..", "leaves the corpus folder"),
        ("/etc/passwd", "is absolute"),
        ("irs/p590a.md\x00.txt", "NUL byte"),
        ("irs", "is a directory"),
        (".", "is a directory"),
        ("irs/missing.md", "no such document"),
    ],
    ids=[
        "empty",
        "dotdot",
        "dotdot-twice",
        "dotdot-into-sibling-folder",
        "bare-dotdot",
        "absolute",
        "nul",
        "directory",
        "folder-itself",
        "missing",
    ],
)
def test_bad_path_is_refused_naming_it(root, path, reason):
    with pytest.raises(CorpusPathError, match=reason) as raised:
        read_corpus_document("read_tax_authority", path, root=root)
    assert repr(path) in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_absolute_path_inside_the_folder_is_still_refused(root):
    inside = str(root / "tax-authority" / "irs" / "p590a.md")
    with pytest.raises(CorpusPathError, match="is absolute"):
        read_corpus_document("read_tax_authority", inside, root=root)


def test_symlink_out_of_the_folder_is_refused(root, tmp_path):
    (root / "tax-authority" / "escape.md").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(CorpusPathError, match="resolves outside tax-authority/"):
        read_corpus_document("read_tax_authority", "escape.md", root=root)


def test_symlinked_directory_out_of_the_folder_is_refused(root, tmp_path):
    (root / "tax-authority" / "up").symlink_to(tmp_path)
    with pytest.raises(CorpusPathError, match="resolves outside"):
        read_corpus_document("read_tax_authority", "up/secret.txt", root=root)


def test_symlink_inside_the_folder_is_followed(root):
    (root / "tax-authority" / "latest.md").symlink_to(root / "tax-authority" / "irs" / "bare.md")
    document = read_corpus_document("read_tax_authority", "latest.md", root=root)
    assert document == {"path": "latest.md", "content": "No sidecar here.", "meta": None}


def test_not_utf8_document_is_refused(root):
    (root / "tax-authority" / "scan.pdf").write_bytes(b"%PDF-1.7\xff\xfe")
    with pytest.raises(CorpusPathError, match="not UTF-8"):
        read_corpus_document("read_tax_authority", "scan.pdf", root=root)


def test_non_string_path_is_refused(root):
    with pytest.raises(CorpusPathError, match="expected a string"):
        read_corpus_document("read_tax_authority", None, root=root)  # type: ignore[arg-type]


def test_unknown_tool_is_refused(root):
    with pytest.raises(ValueError, match="unknown corpus reader tool 'read_anything'"):
        read_corpus_document("read_anything", "irs/p590a.md", root=root)


def test_missing_folder_is_a_missing_document(tmp_path):
    with pytest.raises(CorpusPathError, match="no such document in mortgage-code/"):
        read_corpus_document("read_mortgage_authority", "x.xml", root=tmp_path)


def test_example_corpus_has_every_folder_and_reads():
    for tool, folder in CORPUS_FOLDERS.items():
        documents = [
            p for p in (EXAMPLES_CORPUS / folder).rglob("*") if p.is_file() and not p.name.endswith(".meta.json")
        ]
        assert documents, f"examples/corpus/{folder} is empty"
        for document in documents:
            relative = document.relative_to(EXAMPLES_CORPUS / folder).as_posix()
            read = read_corpus_document(tool, relative, root=EXAMPLES_CORPUS)
            assert read["path"] == relative
            assert read["content"].strip()
            sidecar = document.with_name(document.name + ".meta.json")
            if sidecar.exists():
                meta = read["meta"]
                assert meta is not None and meta == json.loads(sidecar.read_text(encoding="utf-8"))
                assert isinstance(meta.get("title"), str)
            else:
                assert read["meta"] is None


def test_example_corpus_reads_ecfr_sidecar():
    read = read_corpus_document("read_mortgage_authority", "cfr/12/1026/1026.43.xml", root=EXAMPLES_CORPUS)
    assert read["meta"] is not None
    assert read["meta"]["source_url"].startswith("https://www.ecfr.gov/api/versioner/v1/full/")


def test_a_sidecar_is_not_a_document(tmp_path):
    folder = tmp_path / "tax-authority" / "irs"
    folder.mkdir(parents=True)
    (folder / "a.md").write_text("text")
    (folder / "a.md.meta.json").write_text('{"title": "A"}')
    with pytest.raises(CorpusPathError) as raised:
        read_corpus_document("read_tax_authority", "irs/a.md.meta.json", root=tmp_path)
    assert "sidecar" in str(raised.value) and "irs/a.md.meta.json" in str(raised.value)
