"""Account ids from rows (docs/accounts.md). Pure: no database."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citations.accounts import ACCOUNT_ID_COLUMNS, account_ref_from_row, is_account_id
from citations.targets import PROVIDERS, AccountRef
from tests.cases import golden_params, load_cases

ACCOUNT_CASES = load_cases("account_ids.json")

PLAID_ID = "FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U"
SNAPTRADE_ID = "a7b7acbf-11fe-4ce6-b449-69fa337d6741"


@pytest.mark.parametrize("case", golden_params(ACCOUNT_CASES))
def test_account_golden_case(case):
    ref = account_ref_from_row(case["row"])
    assert (None if ref is None else ref.to_json()) == case["expect"]


@pytest.mark.parametrize(
    "value",
    [
        "A" * 16,
        "A" * 128,
        "a7b7acbf-11fe-4ce6-b449-69fa337d6741",
        "____------______",
        "1234567890123456a",
        "-123456789012345",
    ],
)
def test_is_account_id_accepts(value):
    assert is_account_id(value)


@pytest.mark.parametrize(
    "value",
    [
        "A" * 15,
        "A" * 129,
        "1" * 16,
        "1" * 128,
        PLAID_ID + "\n",  # `$` would let this through; fullmatch does not
        "\n" + PLAID_ID,
        PLAID_ID + " ",
        "acc 1234567890abcdef",
        "ACCÉNT1234567890ab",  # non-ASCII letter
        "１２３４５６７８９０１２３４５６ａ",  # full-width: not ASCII
        "٠١٢٣٤٥٦٧٨٩٠١٢٣٤٥٦a",  # Arabic-Indic digits
        "abcd.efgh.ijkl.mnop",
        "",
        None,
        True,
        1234567890123456789,
        12345678901234567.0,
        b"FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U",
        [PLAID_ID],
    ],
)
def test_is_account_id_rejects(value):
    assert not is_account_id(value)


def test_other_source_stops_only_when_source_account_id_holds_an_id():
    # An id in source_account_id with a non-provider source: no account at all,
    # even though a later column holds a valid id.
    row = {"source": "coinbase", "source_account_id": PLAID_ID, "account_id": SNAPTRADE_ID}
    assert account_ref_from_row(row) is None
    # No id in source_account_id: the source does not matter, go on to step 2.
    row = {"source": "coinbase", "source_account_id": "0x5290", "snaptrade_account_id": SNAPTRADE_ID}
    assert account_ref_from_row(row) == AccountRef(SNAPTRADE_ID, "snaptrade")
    row = {"source": "coinbase", "account_id": PLAID_ID}
    assert account_ref_from_row(row) == AccountRef(PLAID_ID, None)


@pytest.mark.parametrize("source", ["Plaid", "PLAID", " plaid", "plaid\n", "", 5, True, ["plaid"], {"p": 1}])
def test_source_matches_exactly(source):
    assert account_ref_from_row({"source": source, "source_account_id": PLAID_ID}) is None


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_each_provider_source(provider):
    ref = account_ref_from_row({"source": provider, "source_account_id": PLAID_ID})
    assert ref == AccountRef(PLAID_ID, provider)


def test_manual_columns_in_order():
    row = {"manual_account_uuid": "d1d67b0f-c0fa-4035-a249-067b20c72546", "account_uuid": SNAPTRADE_ID}
    assert account_ref_from_row(row) == AccountRef("d1d67b0f-c0fa-4035-a249-067b20c72546", "manual")
    row = {"manual_account_uuid": "short", "account_uuid": SNAPTRADE_ID, "account_id": PLAID_ID}
    assert account_ref_from_row(row) == AccountRef(SNAPTRADE_ID, "manual")


def test_trailing_newline_id_passes_to_the_next_column():
    row = {"source_account_id": PLAID_ID + "\n", "source": "plaid", "account_id": SNAPTRADE_ID}
    assert account_ref_from_row(row) == AccountRef(SNAPTRADE_ID, None)


class _Spy(dict):
    """A row that records which columns were read."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read: set[str] = set()

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)


def test_only_id_columns_and_source_are_read():
    row = _Spy(
        clerk_id="user_2NNEqL2nrIRdJ194ndJqAHwEfxC",
        item_id="eVBnVMp7zdTJLkRNr33Rs6zr7KNJqBFL9DrE6",
        access_token="access-sandbox-de3ce8ef-33f8-452c-a685-8671031fc0f6",
        account_name="Checking",
    )
    assert account_ref_from_row(row) is None
    assert row.read <= set(ACCOUNT_ID_COLUMNS) | {"source"}


def test_a_non_mapping_row_names_no_account():
    assert account_ref_from_row([("account_id", PLAID_ID)]) is None
    assert account_ref_from_row(None) is None


id_like = st.from_regex(r"[A-Za-z0-9_-]{14,20}", fullmatch=True)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
cell = (
    id_like
    | st.sampled_from([*sorted(PROVIDERS), "coinbase", "Plaid"])
    | json_scalars
    | st.lists(json_scalars, max_size=2)
)
rows = st.dictionaries(
    st.sampled_from([*ACCOUNT_ID_COLUMNS, "source", "account_name", "clerk_id"]) | st.text(max_size=8),
    cell,
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(rows)
def test_account_ref_from_row_never_raises_and_returns_a_valid_id(row):
    ref = account_ref_from_row(row)
    if ref is not None:
        assert is_account_id(ref.account_id)
        assert ref.provider in PROVIDERS or ref.provider is None
        # The id came from one of the id columns.
        assert any(row.get(column) == ref.account_id for column in ACCOUNT_ID_COLUMNS)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="ascii"), max_size=130))
def test_is_account_id_matches_its_definition(value):
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
    expected = 16 <= len(value) <= 128 and set(value) <= allowed and not value.isdigit()
    assert is_account_id(value) == expected
