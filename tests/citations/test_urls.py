"""Readable pages for downloads (docs/citable.md) and account paths (docs/privacy.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citations.urls import (
    account_id_candidates,
    account_path,
    encode_uri_component,
    humanize_citation_url,
)
from tests.cases import golden_params, load_cases

URL_CASES = load_cases("humanize_urls.json")

ECFR = "https://www.ecfr.gov/api/versioner/v1/full"
USC = "https://uscode.house.gov/download/releasepoints/us/pl"


@pytest.mark.parametrize("case", golden_params(URL_CASES))
def test_humanize_golden_case(case):
    assert humanize_citation_url(case["url"]) == case["expect"]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"{ECFR}/current/title-12.xml?part=1026", "https://www.ecfr.gov/current/title-12/part-1026"),
        (f"{ECFR}/current/title-26.xml", "https://www.ecfr.gov/current/title-26"),
        (f"{ECFR}/2024-01-01/title-12.xml", "https://www.ecfr.gov/on/2024-01-01/title-12"),
        # section wins over part
        (
            f"{ECFR}/2024-01-01/title-12.xml?section=1026.19&part=1026",
            "https://www.ecfr.gov/on/2024-01-01/title-12/section-1026.19",
        ),
        # subpart wins over appendix
        (
            f"{ECFR}/2025-03-01/title-12.xml?part=1026&appendix=J&subpart=E",
            "https://www.ecfr.gov/on/2025-03-01/title-12/part-1026/subpart-E",
        ),
        (
            f"{ECFR}/2025-03-01/title-12.xml?part=1026&appendix=J",
            "https://www.ecfr.gov/on/2025-03-01/title-12/part-1026/appendix-J",
        ),
        # subpart and appendix need a part
        (f"{ECFR}/2025-03-01/title-12.xml?subpart=E", "https://www.ecfr.gov/on/2025-03-01/title-12"),
        (f"{ECFR}/2025-03-01/title-12.xml?appendix=J", "https://www.ecfr.gov/on/2025-03-01/title-12"),
        # present but empty counts as not given
        (f"{ECFR}/2025-03-01/title-12.xml?section=&part=1026", "https://www.ecfr.gov/on/2025-03-01/title-12/part-1026"),
        (f"{ECFR}/2025-03-01/title-12.xml?part=&section=", "https://www.ecfr.gov/on/2025-03-01/title-12"),
        (f"{ECFR}/2025-03-01/title-12.xml?part=1026&subpart=", "https://www.ecfr.gov/on/2025-03-01/title-12/part-1026"),
        # values are encoded as encodeURIComponent does
        (
            f"{ECFR}/2025-03-01/title-12.xml?part=1026&appendix=Supplement+I%2FPart+1026",
            "https://www.ecfr.gov/on/2025-03-01/title-12/part-1026/appendix-Supplement%20I%2FPart%201026",
        ),
        (
            f"{ECFR}/2025-03-01/title-12.xml?section=1026.19(e)",
            "https://www.ecfr.gov/on/2025-03-01/title-12/section-1026.19(e)",
        ),
        (
            f"{ECFR}/2025-03-01/title-12.xml?section=%C2%A7%201",
            "https://www.ecfr.gov/on/2025-03-01/title-12/section-%C2%A7%201",
        ),
        # http is accepted; the reader page is https
        (
            "http://www.ecfr.gov/api/versioner/v1/full/2024-01-01/title-12.xml?part=1026",
            "https://www.ecfr.gov/on/2024-01-01/title-12/part-1026",
        ),
        # US Code
        (
            f"{USC}/118/200/xml_usc05a@118-200.zip",
            "https://uscode.house.gov/view.xhtml?path=/prelim@title5a&edition=prelim",
        ),
        (
            f"{USC}/118/200/htm_usc08@118-200.zip",
            "https://uscode.house.gov/view.xhtml?path=/prelim@title8&edition=prelim",
        ),
        (
            f"{USC}/118/209not159/pdf_usc26@118-209not159.zip",
            "https://uscode.house.gov/view.xhtml?path=/prelim@title26&edition=prelim",
        ),
        (
            f"{USC}/118/200/xhtml_usc50A@118-200.zip",
            "https://uscode.house.gov/view.xhtml?path=/prelim@title50A&edition=prelim",
        ),
        (
            f"{USC}/118/200/xml_usc00@118-200.zip",
            "https://uscode.house.gov/view.xhtml?path=/prelim@title0&edition=prelim",
        ),
        (f"{USC}/119/99/pdf_uscAll@119-99.zip", "https://uscode.house.gov/browse.xhtml"),
        (
            "http://uscode.house.gov/download/releasepoints/us/pl/119/99/xml_usc26@119-99.zip",
            "https://uscode.house.gov/view.xhtml?path=/prelim@title26&edition=prelim",
        ),
    ],
)
def test_humanize(url, expected):
    assert humanize_citation_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        f"{USC}/119/99/xml_usc26@118-99.zip",  # congress mismatch
        f"{USC}/119/99/xml_usc26@119-98.zip",  # point mismatch
        f"{USC}/118/209not159/xml_usc26@118-209.zip",
        f"{USC}/119/99/txt_usc26@119-99.zip",  # unknown format
        f"{USC}/119/99/xml_usc26@119-99.tar",
        f"{USC}/119/99/xml_uscall@119-99.zip",  # `All` as written
        f"{USC}/119/99/xml_usc26ab@119-99.zip",
        "https://uscode.house.gov/view.xhtml?path=/prelim@title26&edition=prelim",
        f"{ECFR}/2024-1-01/title-12.xml?part=1026",  # not YYYY-MM-DD
        f"{ECFR}/latest/title-12.xml?part=1026",
        f"{ECFR}/2024-01-01/title-12.json?part=1026",
        f"{ECFR}/2024-01-01/title-twelve.xml",
        f"{ECFR}/２０２４-01-01/title-12.xml",  # non-ASCII digits
        "https://ecfr.gov/api/versioner/v1/full/2024-01-01/title-12.xml?part=1026",  # host as written
        "https://WWW.ECFR.GOV/api/versioner/v1/full/2024-01-01/title-12.xml?part=1026",
        "HTTPS://www.ecfr.gov/api/versioner/v1/full/2024-01-01/title-12.xml?part=1026",
        "ftp://www.ecfr.gov/api/versioner/v1/full/2024-01-01/title-12.xml?part=1026",
        " https://www.ecfr.gov/api/versioner/v1/full/2024-01-01/title-12.xml?part=1026",
        "https://www.ecfr.gov/api/versioner/v1/full/2024-01-01/title-12.xml\n",
        "https://www.ecfr.gov:443/api/versioner/v1/full/2024-01-01/title-12.xml",
        "https://www.ecfr.gov/current/title-12/part-1026",
        "https://www.irs.gov/pub/irs-pdf/p590a.pdf?x=1#page=3",
        "https://Example.ORG/Path/?q=a%20b&q=%7e#Frag",
        "https://[::1/broken",
        "not a url",
        "",
    ],
)
def test_anything_else_comes_back_byte_for_byte(url):
    assert humanize_citation_url(url) == url


def test_humanize_refuses_non_strings():
    with pytest.raises(TypeError):
        humanize_citation_url(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        humanize_citation_url(b"https://www.ecfr.gov/")  # type: ignore[arg-type]


def test_encode_uri_component_matches_javascript():
    # encodeURIComponent("a b/c?d=é&~*'()!-_.") in JavaScript
    assert encode_uri_component("a b/c?d=é&~*'()!-_.") == "a%20b%2Fc%3Fd%3D%C3%A9%26~*'()!-_."
    assert encode_uri_component("😀") == "%F0%9F%98%80"


def test_account_path():
    assert account_path("FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U") == "/accounts/FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U"
    assert account_path("a b/c") == "/accounts/a%20b%2Fc"
    with pytest.raises(TypeError):
        account_path(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("segment", "expected"),
    [
        ("FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U", ["FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U"]),
        ("a%20b", ["a%20b", "a b"]),
        ("a%2Fb", ["a%2Fb", "a/b"]),
        ("a+b", ["a+b"]),  # decodeURIComponent leaves `+` alone
        ("100%", ["100%"]),  # decodeURIComponent would throw
        ("%zz", ["%zz"]),
        ("%E0%A4%A", ["%E0%A4%A"]),
        ("%FF", ["%FF"]),  # not UTF-8
        ("%C3%A9", ["%C3%A9", "é"]),
        ("", [""]),
    ],
)
def test_account_id_candidates(segment, expected):
    assert account_id_candidates(segment) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s)))
def test_account_path_round_trips_through_candidates(account_id):
    segment = account_path(account_id).removeprefix("/accounts/")
    assert "/" not in segment
    assert account_id in account_id_candidates(segment)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(max_size=60),
        st.builds(
            lambda date, title, query: f"{ECFR}/{date}/title-{title}.xml?{query}",
            st.sampled_from(["2024-01-01", "current", "2024-1-1"]),
            st.integers(0, 60),
            st.text(max_size=30),
        ),
        st.builds(
            lambda c1, p1, fmt, tt, c2, p2: f"{USC}/{c1}/{p1}/{fmt}_usc{tt}@{c2}-{p2}.zip",
            st.sampled_from(["118", "119"]),
            st.sampled_from(["99", "209not159"]),
            st.sampled_from(["xml", "htm", "xhtml", "pdf", "txt"]),
            st.from_regex(r"[0-9]{1,3}[a-zA-Z]?|All", fullmatch=True),
            st.sampled_from(["118", "119"]),
            st.sampled_from(["99", "209not159"]),
        ),
    )
)
def test_humanize_never_raises_on_strings(url):
    result = humanize_citation_url(url)
    assert isinstance(result, str)
    if result != url:
        assert result.startswith(("https://www.ecfr.gov/", "https://uscode.house.gov/"))
