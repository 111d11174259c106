"""Benchmark: the citation-target backfill against a raw psycopg baseline (docs/backfill.md).

    .venv/bin/python bench/backfill.py                  # 100,000 rows
    .venv/bin/python bench/backfill.py --rows 20000     # `make bench`
    .venv/bin/python bench/backfill.py --rows 1000000   # a few minutes
    .venv/bin/python bench/backfill.py --all-old        # worst case: every row changes

Needs PostgreSQL: `--database-url`, else DATABASE_URL when it is a
postgres:// URL, else postgres://postgres@127.0.0.1:5432/postgres. The bench
creates its own scratch database on that server (`CREATE DATABASE`, so the
role needs CREATEDB), migrates it, and drops it at the end whatever happens;
no other database is touched.

In one run it
1. loads N `ai_chat_logs` rows with COPY (psycopg, not the ORM): a seeded mix
   of old rows the backfill types, old rows it must leave untyped, rows the
   service saved with targets, and a few malformed rows;
2. times, in `--rounds` alternated rounds, each on the rows as loaded (put
   back and vacuumed before every pass):
   - the floor: one `UPDATE` applying the same rule in jsonb to the rows it
     changes (`floor_statement`), never leaving the server;
   - `chat.backfill.backfill_citation_targets` (what the command and the
     migration run) with `--batch-size`;
   and checks that both changed the expected rows and left the same JSON;
3. runs the backfill a second time, which must change nothing;
and prints the median and range of each, rows/s, the backfill/floor ratio
(no goal: it says what the batching and the Python rule cost) and the peak
resident memory (it must not grow with N).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import resource
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._timing import DEFAULT_SERVER_URL, MIN_ROUNDS, Ratio, Timings, postgres_server_url  # noqa: E402
from citations.citable import (  # noqa: E402
    ANALYSIS_SOURCE,
    FINNHUB_SOURCE,
    FINNHUB_TICKER_SOURCE_PREFIX,
    LIBRARY_SOURCE_PREFIXES,
    PORTFOLIO_SOURCE,
)

DEFAULT_URL = DEFAULT_SERVER_URL
ALIAS = "backfill_bench"

COPY_COLUMNS = (
    "id", "session_id", "user_id", "user_message", "response", "citations", "inline_citations", "prompt_version",
    "model", "created_at",
)  # fmt: skip

TICKERS = ["AAPL", "MSFT", "NVDA", "brk.b", "VTI", "GOOGL", "tsla", "SPY"]
LIBRARY = [
    "silvia://tax-authority/irs/p590a.md",
    "silvia://credit-card-corpus/chase/sapphire.md",
    "silvia://mortgage-code/cfr/12/1026.md",
]
UNTYPEABLE = [
    "silvia://your-account/checking",
    "silvia://your-account/brokerage",
    "https://www.irs.gov/publications/p590a",
    "https://www.reuters.com/markets/us/stocks-rally-2026-11-02/",
    "silvia://search/search_web",
]
_SENTENCE = (
    "the total balance of your account rose fell by percent since last month while fees interest dividends were paid"
)
WORDS = _SENTENCE.split()


def _peak_rss_mib() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def _source(rng: random.Random, row_kind: str) -> tuple[str, dict[str, Any] | None]:
    """A source and the target the service would have given it."""
    if row_kind == "old-untypeable":
        return rng.choice(UNTYPEABLE), None
    roll = rng.random()
    if roll < 0.2:
        return "silvia://your-portfolio", {"kind": "portfolio"}
    if roll < 0.35:
        return rng.choice(["silvia://analysis", "silvia://market-data/finnhub"]), {"kind": "analysis"}
    if roll < 0.55:
        ticker = rng.choice(TICKERS)
        return f"silvia://market-data/finnhub/{ticker}", {"kind": "market_data", "ticker": ticker.upper()}
    if roll < 0.7:
        source = rng.choice(LIBRARY)
        kind = {"tax": "tax_reference", "cre": "card_document", "mor": "mortgage_reference"}[source[9:12]]
        return source, {"kind": kind, "url": None}
    if roll < 0.85 and row_kind == "typed":
        account_id = "".join(
            rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789") for _ in range(37)
        )
        return "silvia://your-account/checking", {"kind": "account", "accountId": account_id, "provider": "plaid"}
    return rng.choice(UNTYPEABLE), None


def generate_row(rng: random.Random, *, all_old: bool = False) -> tuple[str, Any, Any]:
    """(row kind, citations, inline_citations) of one realistic row.

    35% old rows with sources the backfill types (mixed with untypeable ones),
    25% old rows it leaves untyped, 39.8% rows saved with targets, 0.2%
    malformed. With `all_old`, every row is an old one the backfill types.
    """
    roll = 0.1 if all_old else rng.random()
    if roll < 0.002:
        # Lists only: the check constraints (migration 0003) refuse a column that is no array.
        bad = rng.choice([[{"source": "silvia://analysis"}, 1], [None], [[{"source": "silvia://analysis"}]]])
        return (
            "malformed",
            bad,
            [{"source": "silvia://analysis", "title": "Analysis", "cited_text": "x", "start": 0, "end": 1}],
        )
    row_kind = "old-typeable" if roll < 0.352 else "old-untypeable" if roll < 0.602 else "typed"
    citations: list[dict[str, Any]] = []
    inline: list[dict[str, Any]] = []
    position = 0
    for _ in range(rng.randint(1, 6)):
        source, target = _source(rng, row_kind)
        entry: dict[str, Any] = {"source": source, "title": _text(rng, 1, 5), "cited_text": _text(rng, 6, 30)}
        if row_kind == "typed" and target is not None:
            entry["target"] = target
        citations.append(entry)
        for _ in range(rng.randint(1, 2)):
            start = position + rng.randint(0, 80)
            position = start + rng.randint(5, 60)
            inline.append(
                {
                    **{k: v for k, v in entry.items() if k != "target"},
                    "start": start,
                    "end": position,
                    **({"target": target} if "target" in entry else {}),
                }
            )
    return row_kind, citations, inline


def load_rows(
    url: str, *, rows: int, session_ids: list[uuid.UUID], user_id: int, seed: int, all_old: bool = False
) -> int:
    """COPY `rows` generated rows into the scratch table; returns how many the backfill must change."""
    import psycopg

    from citations.backfill import backfill_citation_list

    rng = random.Random(seed)
    created = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    expected_changes = 0
    with psycopg.connect(url) as conn, conn.cursor() as cursor:  # noqa: SIM117 - the COPY reads better as its own block
        with cursor.copy(f"COPY ai_chat_logs ({', '.join(COPY_COLUMNS)}) FROM STDIN") as copy:
            for n in range(rows):
                row_kind, citations, inline = generate_row(rng, all_old=all_old)
                c_result, i_result = backfill_citation_list(citations), backfill_citation_list(inline)
                if c_result is not None and i_result is not None and (c_result.changed or i_result.changed):
                    expected_changes += 1
                copy.write_row(
                    (
                        uuid.UUID(int=rng.getrandbits(128), version=4),
                        session_ids[n % len(session_ids)],
                        user_id,
                        _text(rng, 4, 20),
                        _text(rng, 60, 250),
                        json.dumps(citations),
                        json.dumps(inline),
                        "v5" if row_kind == "typed" else "legacy",
                        "claude-sonnet-4-5-20250929",
                        created + dt.timedelta(seconds=n),
                    )
                )
    return expected_changes


def _typed_list_sql(column: str) -> str:
    """The SQL of `column` with the backfill rule applied entry by entry (`citations.backfill`, in jsonb)."""
    source = "e ->> 'source'"
    ticker = f"upper(substr({source}, {len(FINNHUB_TICKER_SOURCE_PREFIX) + 1}))"
    library = "".join(
        f'WHEN {source} LIKE \'{prefix}_%\' THEN e || \'{{"target": {{"kind": "{kind.kind}", "url": null}}}}\' '
        for prefix, kind in LIBRARY_SOURCE_PREFIXES.items()
    )
    return (
        "COALESCE((SELECT jsonb_agg(CASE WHEN e ? 'target' OR jsonb_typeof(e -> 'source') <> 'string' THEN e "
        f'WHEN {source} = \'{PORTFOLIO_SOURCE}\' THEN e || \'{{"target": {{"kind": "portfolio"}}}}\' '
        f"WHEN {source} IN ('{FINNHUB_SOURCE}', '{ANALYSIS_SOURCE}') "
        'THEN e || \'{"target": {"kind": "analysis"}}\' '
        f"WHEN {source} LIKE '{FINNHUB_TICKER_SOURCE_PREFIX}%' AND {ticker} ~ '^[A-Z][A-Z0-9.-]{{0,9}}$' "
        f"AND octet_length({source}) = char_length({source}) "
        f"THEN e || jsonb_build_object('target', jsonb_build_object('kind', 'market_data', 'ticker', {ticker})) "
        f"{library}ELSE e END ORDER BY n) FROM jsonb_array_elements({column}) WITH ORDINALITY AS a(e, n)), '[]')"
    )


def _well_formed_sql(column: str) -> str:
    return (
        f"jsonb_typeof({column}) = 'array' AND NOT EXISTS "
        f"(SELECT 1 FROM jsonb_array_elements({column}) AS e WHERE jsonb_typeof(e) <> 'object')"
    )


def floor_statement() -> str:
    """One `UPDATE`: the same rule in jsonb, on the rows it changes, never leaving the server.

    The least any backfill of these rows costs: no row travels to a client,
    nothing is decoded in Python, one statement and one transaction (so it
    is no model for a live table: it locks every row it changes until the end).
    """
    return (
        "UPDATE ai_chat_logs AS t SET citations = n.c, inline_citations = n.i FROM "
        f"(SELECT id, {_typed_list_sql('citations')} AS c, {_typed_list_sql('inline_citations')} AS i "
        f"FROM ai_chat_logs WHERE {_well_formed_sql('citations')} AND {_well_formed_sql('inline_citations')}) AS n "
        "WHERE t.id = n.id AND (n.c <> t.citations OR n.i <> t.inline_citations)"
    )


def run_floor(url: str) -> int:
    """The floor statement; returns the rows it changed."""
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(floor_statement()).rowcount


def _snapshot(url: str) -> str:
    """A digest of every row's two columns (jsonb text, so key order is normalised), computed by the server."""
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT md5(string_agg(id::text || citations::text || inline_citations::text, ',' ORDER BY id)) "
            "FROM ai_chat_logs"
        ).fetchone()
    return row[0] if row else ""


def _restore(url: str) -> None:
    """Put back the columns as loaded (from `bench_original`), then vacuum: each pass meets the same table."""
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute(
            "UPDATE ai_chat_logs AS t SET citations = o.citations, inline_citations = o.inline_citations "
            "FROM bench_original AS o WHERE t.id = o.id "
            "AND (t.citations <> o.citations OR t.inline_citations <> o.inline_citations)"
        )
    _vacuum(url)


def _vacuum(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE ai_chat_logs")


def _setup_django(scratch_url: str) -> None:
    """Configure Django from silvia.settings and add the scratch database as `ALIAS`."""
    import django
    import environ

    from bench._django import use_bench_settings

    use_bench_settings()
    django.setup()
    from django.conf import settings
    from django.db import connections

    config = connections.configure_settings({"default": environ.Env.db_url_config(scratch_url)})["default"]
    settings.DATABASES[ALIAS] = config
    connections.settings[ALIAS] = config


def run(
    *, rows: int, batch_size: int, database_url: str, all_old: bool = False, seed: int = 4, rounds: int = MIN_ROUNDS
) -> dict[str, Any]:
    """Create the scratch database, run both passes, drop it; returns the figures."""
    import psycopg

    from bench._scratch import create_database, database_urls, drop_database, scratch_name

    name = scratch_name("backfill")
    scratch_url, scratch_dsn = database_urls(database_url, name)
    create_database(database_url, name)
    figures: dict[str, Any] = {
        "rows": rows,
        "batch_size": batch_size,
        "all_old": all_old,
        "rss_start_mib": _peak_rss_mib(),
    }
    try:
        _setup_django(scratch_dsn)
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connections

        from chat.backfill import backfill_citation_targets
        from chat.models import ChatLog, ChatSession

        call_command("migrate", database=ALIAS, verbosity=0)
        user = get_user_model().objects.db_manager(ALIAS).create(username="bench")
        sessions = [ChatSession.objects.using(ALIAS).create(user=user, title=f"bench {n}").id for n in range(50)]

        started = time.perf_counter()
        expected_changes = load_rows(
            scratch_url, rows=rows, session_ids=sessions, user_id=user.pk, seed=seed, all_old=all_old
        )
        figures["load_seconds"] = time.perf_counter() - started
        figures["rss_after_load_mib"] = _peak_rss_mib()
        _vacuum(scratch_url)

        with psycopg.connect(scratch_url) as conn:
            conn.execute("CREATE TABLE bench_original AS SELECT id, citations, inline_citations FROM ai_chat_logs")

        floor_runs: list[float] = []
        backfill_runs: list[float] = []
        results = {}
        for round_number in range(max(rounds, MIN_ROUNDS)):
            # Alternate which side goes first, so load hits both alike.
            for side in ("floor", "backfill") if round_number % 2 == 0 else ("backfill", "floor"):
                _restore(scratch_url)
                started = time.perf_counter()
                if side == "floor":
                    changed = run_floor(scratch_url)
                    floor_runs.append(time.perf_counter() - started)
                    assert changed == expected_changes, (changed, expected_changes)
                else:
                    report = backfill_citation_targets(model=ChatLog, batch_size=batch_size, using=ALIAS)
                    backfill_runs.append(time.perf_counter() - started)
                    assert report.rows_scanned == rows and report.rows_changed == expected_changes, (
                        report.rows_scanned,
                        report.rows_changed,
                        expected_changes,
                    )
                if side not in results:
                    results[side] = _snapshot(scratch_url)
        assert results["floor"] == results["backfill"], "the floor and the backfill left different rows"
        figures["rss_after_backfill_mib"] = _peak_rss_mib()

        started = time.perf_counter()
        again = backfill_citation_targets(model=ChatLog, batch_size=batch_size, using=ALIAS)
        figures["rerun_seconds"] = time.perf_counter() - started
        figures["rss_after_rerun_mib"] = _peak_rss_mib()
        assert again.rows_scanned == rows and again.rows_changed == 0, (again.rows_scanned, again.rows_changed)
        floor_t, backfill_t = Timings(tuple(floor_runs)), Timings(tuple(backfill_runs))
        figures.update(
            changed=report.rows_changed,
            typed=report.typed_total,
            malformed=len(report.malformed),
            floor=floor_t,
            backfill=backfill_t,
            rerun_rate=rows / figures["rerun_seconds"],
            ratio=Ratio.of(backfill_t, floor_t),
        )
    finally:
        try:
            from django.db import connections

            connections[ALIAS].close()
        except Exception:  # Django may not have been set up
            pass
        drop_database(database_url, name)
    return figures


def format_figures(f: dict[str, Any]) -> str:
    rows = f["rows"]
    floor, backfill = f["floor"], f["backfill"]
    return "\n".join(
        [
            f"backfill bench: {rows} rows{' (all old: every row changes)' if f['all_old'] else ''}, "
            f"batch size {f['batch_size']} (loaded by COPY in {f['load_seconds']:.1f}s); "
            f"{f['changed']} rows changed, {f['typed']} targets added, {f['malformed']} malformed rows skipped",
            floor.line("floor (one jsonb UPDATE of the same rows)", width=48)
            + f"  {rows / floor.median:>9,.0f} rows/s",
            backfill.line("backfill_citation_targets", width=48) + f"  {rows / backfill.median:>9,.0f} rows/s",
            f"  second run (changes nothing): {f['rerun_rate']:>9,.0f} rows/s ({f['rerun_seconds']:.2f}s)",
            f"  backfill/floor time {f['ratio'].text()} (no goal: the floor never leaves the server)",
            f"  peak RSS MiB: start {f['rss_start_mib']:.0f}, after load {f['rss_after_load_mib']:.0f}, "
            f"after the rounds {f['rss_after_backfill_mib']:.0f}, after the second run {f['rss_after_rerun_mib']:.0f}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows to generate (default 100000; try 1000000)")
    parser.add_argument("--batch-size", type=int, default=1000, help="rows per batch for both passes (default 1000)")
    parser.add_argument("--rounds", type=int, default=MIN_ROUNDS, help="alternated rounds of floor and backfill")
    parser.add_argument(
        "--all-old", action="store_true", help="worst case: every row is an old row the backfill changes"
    )
    parser.add_argument(
        "--database-url",
        help=f"a PostgreSQL server to create the scratch database on (default DATABASE_URL, else {DEFAULT_URL})",
    )
    args = parser.parse_args(argv)
    if args.rows < 1 or args.batch_size < 1:
        parser.error("--rows and --batch-size must be positive")
    url = postgres_server_url(args.database_url)
    print(
        format_figures(
            run(rows=args.rows, batch_size=args.batch_size, database_url=url, all_old=args.all_old, rounds=args.rounds)
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
