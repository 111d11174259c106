"""Benchmark: `manage.py import_turns` on PostgreSQL against an executemany of the same final rows.

    .venv/bin/python bench/import_turns.py [--records 10000] [--json-mb 20] [--database-url URL]

Records are the 15 of `examples/turns`, repeated with fresh record and
session ids (each copy of a session keeps its 3 turns together) and times
moved so every copy is distinct, written to a `.jsonl` file.

- import: `python manage.py import_turns FILE.jsonl`, the real command in a
  child process (Django start-up included), on a scratch database. Its
  fixed cost (the same command on an empty file) is printed too, with the
  rate without it.
- floor: the rows that import wrote (sessions and logs, every column, JSON
  as text) read back, the tables emptied, and the same rows inserted again
  with psycopg `executemany` in one transaction: what any importer must at
  least send. Goal: import turns/s >= 1/3 of the floor's.

Then `--json-mb` (0 skips): records up to about that size, written as one
pretty-printed `.json` list and as `.jsonl`; each is imported into emptied
tables; goal: the `.json` list takes at most 2x the `.jsonl` time.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from bench._http import django_env, scratch_postgres  # noqa: E402
from bench._load import add_user, migrate  # noqa: E402
from bench._timing import DEFAULT_SERVER_URL, postgres_server_url  # noqa: E402

GOAL_FLOOR = 1 / 3
GOAL_JSON = 2.0


def example_records() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for path in sorted((ROOT / "examples" / "turns").glob("*.json")):
        value = json.loads(path.read_text())
        records.extend(value if isinstance(value, list) else [value])
    return records


def derived_records(count: int, seed: int = 3) -> list[dict[str, Any]]:
    """`count` records from the examples, each with its own id; sessions copied whole."""
    rng = random.Random(seed)
    base = example_records()
    out: list[dict[str, Any]] = []
    copy_number = 0
    while len(out) < count:
        session_ids: dict[str, str] = {}
        shift = dt.timedelta(minutes=copy_number)
        for record in base:
            new = copy.deepcopy(record)
            new["id"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            old_session = record["session"]["id"]
            session_ids.setdefault(old_session, str(uuid.UUID(int=rng.getrandbits(128), version=4)))
            new["session"]["id"] = session_ids[old_session]
            if "created_at" in new:
                new["created_at"] = (
                    dt.datetime.fromisoformat(new["created_at"].replace("Z", "+00:00")) - shift
                ).isoformat()
            out.append(new)
            if len(out) == count:
                break
        copy_number += 1
    return out


def run_import(django_url: str, path: Path) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "manage.py", "import_turns", str(path)],
        cwd=ROOT,
        env=django_env(django_url),
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"import_turns failed: {result.stderr[-2000:]}")
    return elapsed, result.stdout.strip().splitlines()[-1]


def empty_tables(conninfo: str) -> None:
    with psycopg.connect(conninfo) as conn:
        conn.execute("TRUNCATE ai_chat_logs, chat_sessions")


def floor(conninfo: str) -> tuple[float, int]:
    """Read back what import wrote, empty the tables, insert the same rows with executemany; (seconds, rows)."""
    with psycopg.connect(conninfo) as conn:
        tables = {}
        for table in ("chat_sessions", "ai_chat_logs"):
            cur = conn.execute(f"SELECT * FROM {table}")
            names = [d.name for d in cur.description or []]
            types = {
                r[0]: r[1]
                for r in conn.execute(
                    "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s", [table]
                )
            }
            rows = [
                [json.dumps(v) if types[n] == "jsonb" else v for n, v in zip(names, row, strict=True)]
                for row in cur.fetchall()
            ]
            tables[table] = (names, types, rows)
        conn.execute("TRUNCATE ai_chat_logs, chat_sessions")
        conn.commit()
        started = time.perf_counter()
        with conn.transaction():
            for table, (names, types, rows) in tables.items():
                placeholders = ", ".join("%s::jsonb" if types[n] == "jsonb" else "%s" for n in names)
                conn.cursor().executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({placeholders})", rows)
        elapsed = time.perf_counter() - started
    return elapsed, len(tables["ai_chat_logs"][2])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--json-mb", type=float, default=20, help="size of the .json vs .jsonl comparison (0: skip)")
    parser.add_argument(
        "--database-url", help=f"PostgreSQL server (default DATABASE_URL when postgres://, else {DEFAULT_SERVER_URL})"
    )
    args = parser.parse_args(argv)
    server_url = postgres_server_url(args.database_url)
    with (
        tempfile.TemporaryDirectory(prefix="silvia_bench_") as folder,
        scratch_postgres(server_url) as (conninfo, django_url),
    ):
        migrate(django_url)
        with psycopg.connect(conninfo) as conn:
            add_user(conn, "maya")
            add_user(conn, "sam")
        records = derived_records(args.records)
        jsonl = Path(folder) / "turns.jsonl"
        jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
        empty = Path(folder) / "empty.jsonl"
        empty.write_text("")
        fixed, _ = run_import(django_url, empty)
        seconds, summary = run_import(django_url, jsonl)
        floor_seconds, rows = floor(conninfo)
        assert rows == args.records, (rows, args.records)
        rate, floor_rate = args.records / seconds, rows / floor_seconds
        steady = args.records / max(seconds - fixed, 1e-9)
        ratio = rate / floor_rate
        print(f"import_turns bench, PostgreSQL: {args.records} records ({jsonl.stat().st_size / 1e6:.1f} MB .jsonl)")
        print(f"  import_turns  {seconds:8.2f} s  {rate:9.0f} turns/s   ({summary})")
        print(
            f"  floor         {floor_seconds:8.2f} s  {floor_rate:9.0f} turns/s   "
            "(executemany of the same final rows, one transaction)"
        )
        print(f"  import/floor turns/s {ratio:.3f} (goal >= 1/3: {'met' if ratio >= GOAL_FLOOR else 'NOT MET'})")
        print(
            f"  without the command's fixed start-up ({fixed:.2f} s: interpreter, Django, an empty file): "
            f"{steady:.0f} turns/s, {steady / floor_rate:.3f} of the floor",
            flush=True,
        )
        if args.json_mb:
            size = len(jsonl.read_bytes()) / len(records)
            big = derived_records(max(1, int(args.json_mb * 1e6 / (size * 1.4))), seed=4)
            as_json = Path(folder) / "turns.json"
            as_json.write_text(json.dumps(big, indent=2))
            as_jsonl = Path(folder) / "big.jsonl"
            as_jsonl.write_text("".join(json.dumps(r) + "\n" for r in big))
            empty_tables(conninfo)
            jsonl_seconds, _ = run_import(django_url, as_jsonl)
            empty_tables(conninfo)
            json_seconds, _ = run_import(django_url, as_json)
            print(
                f"import_turns .json list vs .jsonl: {len(big)} records, "
                f".json {as_json.stat().st_size / 1e6:.0f} MB, .jsonl {as_jsonl.stat().st_size / 1e6:.0f} MB"
            )
            print(
                f"  .jsonl {jsonl_seconds:8.2f} s   .json {json_seconds:8.2f} s   "
                f"ratio {json_seconds / jsonl_seconds:.2f} "
                f"(goal <= {GOAL_JSON:g}: {'met' if json_seconds <= GOAL_JSON * jsonl_seconds else 'NOT MET'})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
