"""Benchmark: target derivation of a large `execute_sql` result against a plain loop (docs/citable.md).

    .venv/bin/python bench/derive.py                                   # 10,000 and 100,000 rows (`make bench`)
    .venv/bin/python bench/derive.py --rows 10000 100000 1000000       # the bench/README.md figures (about two minutes)

An `execute_sql` output of N rows (20 columns: transaction columns, the
label `account_name` and the id columns `source_account_id`, `source`,
`account_id`; 50 accounts, two of them sharing the label "Credit card", and
2% of rows with a null label) goes through
`citations.citable.to_citable_content`, taking turns with the baseline:

- baseline: a loop that only reads each row's label and id columns into a
  dict (`accounts[row["account_name"]] = (row["source_account_id"],
  row["source"])`), the least any derivation must do;
- derive: `to_citable_content(...)`, the blocks with their sources, titles
  and targets: what recording a turn needs. Block texts are built lazily,
  so this does not render the rows;
- derive + texts: `to_citable_content(...)` and then `to_block()` of every
  block, which renders every row's text: what the Messages API request
  needs. No goal; shown so that the lazy texts hide nothing.

For each N it prints median and p95 (`--runs`, default 20; derive + texts
`--texts-runs`, default 5), the derive/baseline ratio (goal: at most 3) and
the time per row, which stays flat as N grows when the cost is linear.
No database and no Django settings are needed beyond `django.setup()`.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._timing import Timings, ratio_line, time_alternately  # noqa: E402

GOAL_RATIO = 3.0
ACCOUNT_COUNT = 50
COLUMNS = (
    "transaction_id", "account_id", "source_account_id", "source", "account_name", "account_type",
    "account_subtype", "date", "authorized_date", "amount", "iso_currency_code", "merchant_name", "name",
    "category", "category_detail", "pending", "payment_channel", "location_city", "running_balance", "tags",
)  # fmt: skip
ID_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789"
MERCHANTS = ["Whole Foods", "Shell", "Amazon", "Delta Air Lines", "Starbucks", "Costco", "Uber", "Netflix", None]
CATEGORIES = [
    ("FOOD_AND_DRINK", "GROCERIES"),
    ("TRANSPORTATION", "GAS"),
    ("GENERAL_MERCHANDISE", "ONLINE"),
    ("TRAVEL", "FLIGHTS"),
    ("ENTERTAINMENT", "STREAMING"),
]
CITIES = ["Austin", "Denver", "Brooklyn", "São Paulo", None]


def make_accounts(rng: random.Random) -> list[tuple[str, str, str, str, str]]:
    """50 (name, source_account_id, source, type, subtype); two share the label "Credit card"."""
    kinds = [
        ("depository", "checking"),
        ("depository", "savings"),
        ("credit", "credit card"),
        ("investment", "brokerage"),
    ]
    accounts = []
    for n in range(ACCOUNT_COUNT):
        account_type, subtype = kinds[n % len(kinds)]
        name = "Credit card" if n in (2, 6) else f"{subtype.title()} {n:02d}"
        account_id = "".join(rng.choice(ID_ALPHABET) for _ in range(37))
        source = ("plaid", "plaid", "snaptrade", "manual")[n % 4]
        accounts.append((name, account_id, source, account_type, subtype))
    return accounts


def make_output(rows: int, seed: int = 7) -> dict[str, Any]:
    """An `execute_sql` output `{"columns": [...], "rows": [...]}` of `rows` transactions."""
    rng = random.Random(seed)
    accounts = make_accounts(rng)
    result = []
    for n in range(rows):
        index = rng.randrange(ACCOUNT_COUNT)
        name, account_id, source, account_type, subtype = accounts[index]
        category, detail = rng.choice(CATEGORIES)
        result.append(
            {
                "transaction_id": f"tx-{n:08d}-{rng.getrandbits(64):016x}",
                "account_id": 1000 + index,  # an internal row id: all digits, never an account id
                "source_account_id": account_id,
                "source": source,
                "account_name": None if rng.random() < 0.02 else name,
                "account_type": account_type,
                "account_subtype": subtype,
                "date": f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}",
                "authorized_date": None
                if rng.random() < 0.3
                else f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}",
                "amount": round(rng.uniform(-2500, 4000), 2),
                "iso_currency_code": "USD",
                "merchant_name": rng.choice(MERCHANTS),
                "name": f"POS {rng.choice(['DEBIT', 'CREDIT'])} {rng.randint(100000, 999999)}",
                "category": category,
                "category_detail": detail,
                "pending": rng.random() < 0.05,
                "payment_channel": rng.choice(["online", "in store", "other"]),
                "location_city": rng.choice(CITIES),
                "running_balance": round(rng.uniform(0, 90000), 2),
                "tags": ["recurring"] if rng.random() < 0.1 else None,
            }
        )
    return {"columns": list(COLUMNS), "rows": result}


def read_ids_and_labels(rows: list[dict[str, Any]]) -> dict[Any, tuple[Any, Any]]:
    """The baseline: read each row's label and id columns into a dict."""
    accounts = {}
    for row in rows:
        accounts[row["account_name"]] = (row["source_account_id"], row["source"])
    return accounts


def run_size(rows: int, *, runs: int, texts_runs: int) -> dict[str, Any]:
    """Generate `rows` rows, check the blocks once, and time baseline, derive and derive + texts."""
    from citations.citable import to_citable_content
    from citations.targets import AccountsTarget, AccountTarget, PortfolioTarget

    output = make_output(rows)
    tool_input = {"query": "SELECT ... FROM transactions JOIN accounts USING (account_id)"}

    def derive() -> list[Any]:
        return to_citable_content("execute_sql", tool_input, output)

    def derive_and_texts() -> list[dict[str, Any]]:
        return [block.to_block() for block in to_citable_content("execute_sql", tool_input, output)]

    def baseline() -> dict[Any, tuple[Any, Any]]:
        return read_ids_and_labels(output["rows"])

    blocks = derive()
    kinds = {type(block.target) for block in blocks}
    assert kinds == {AccountTarget, AccountsTarget, PortfolioTarget}, kinds
    assert len(blocks) == len(baseline()) == ACCOUNT_COUNT, len(blocks)  # 48 accounts + "Credit card" + portfolio
    assert sum(len(block["content"]) for block in derive_and_texts()) == rows

    timed = time_alternately({"baseline": baseline, "derive": derive}, runs=runs)
    timed.update(time_alternately({"derive + texts": derive_and_texts}, runs=texts_runs, warmup=1))
    return {"rows": rows, "blocks": len(blocks), **timed}


def format_figures(f: dict[str, Any]) -> str:
    rows = f["rows"]
    baseline, derive, texts = f["baseline"], f["derive"], f["derive + texts"]
    assert isinstance(baseline, Timings) and isinstance(derive, Timings) and isinstance(texts, Timings)

    def per_row(t: Timings) -> str:
        return f"   {t.median / rows * 1e9:7.0f} ns/row"

    return "\n".join(
        [
            f"derive bench: {rows:,} rows x {len(COLUMNS)} columns, {ACCOUNT_COUNT} accounts -> {f['blocks']} blocks",
            baseline.line("baseline (read label + id columns into dict)") + per_row(baseline),
            derive.line("to_citable_content (blocks + targets)") + per_row(derive),
            texts.line(f"+ to_block() of every block ({len(texts.runs)} runs)") + per_row(texts),
            ratio_line(derive, baseline, goal=GOAL_RATIO, what="derive/baseline"),
            f"  derive + texts/baseline (median) {texts.median / baseline.median:.1f} (no goal: renders every row)",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rows", type=int, nargs="+", default=[10_000, 100_000], help="row counts (default: 10000 100000)"
    )
    parser.add_argument("--runs", type=int, default=20, help="timed runs of baseline and derive (default 20)")
    parser.add_argument("--texts-runs", type=int, default=5, help="timed runs of derive + texts (default 5)")
    args = parser.parse_args(argv)
    if min(args.rows) < 1 or args.runs < 1 or args.texts_runs < 1:
        parser.error("--rows, --runs and --texts-runs must be positive")
    from bench._django import use_bench_settings

    use_bench_settings()
    import django

    django.setup()  # citable uses django.utils.text.slugify
    for rows in args.rows:
        print(format_figures(run_size(rows, runs=args.runs, texts_runs=args.texts_runs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
