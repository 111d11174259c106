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
  as text), read back once, inserted again with psycopg `executemany` in
  one transaction: what any importer must at least send.

The two take turns over `--rounds` rounds (at least 5), each into emptied
tables. Goal: import turns/s >= 1/3 of the floor's (median, with the range
of the per-round ratios).

With `--baseline DIR` (another checkout with its own `.venv`, such as the
tree before a change), that tree's `import_turns` imports the same file into
the same emptied tables in the same rounds, taking turns with this one:
goal, this tree's time at most 1.10x the baseline's (citation support,
SPEC 15, checked against the tree before it).

Then `--json-mb` (0 skips): records up to about that size, written as one
pretty-printed `.json` list and as `.jsonl`; each is imported into emptied
tables, `--json-rounds` times in turns, and the import process's peak RSS
is read (its VmHWM). Goals: the `.json` list's peak memory at most 1.5x the
`.jsonl` import's, its time at most 2x.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import random
import statistics
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
from bench._timing import DEFAULT_SERVER_URL, MIN_ROUNDS, Ratio, Timings, postgres_server_url  # noqa: E402

GOAL_FLOOR = 1 / 3
GOAL_JSON = 2.0
GOAL_JSON_MEMORY = 1.5
GOAL_BASELINE = 1.10


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


def _peak_rss_mib(pid: int) -> float | None:
    """The process's peak resident memory so far (VmHWM), MiB; None once it has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def run_import(django_url: str, path: Path, tree: Path = ROOT) -> tuple[float, str, float]:
    """`manage.py import_turns PATH` of `tree` (its own `.venv` unless it is this one) in a child process:
    (seconds, its summary line, its peak RSS in MiB).

    The peak is the child's own VmHWM, read every 10 ms while it runs (it only
    grows). Not `wait4`'s ru_maxrss: Linux carries the forking parent's peak
    into it, and this process holds the records.
    """
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            [_python(tree), "manage.py", "import_turns", str(path)], cwd=tree, env=django_env(django_url),
            stdout=out, stderr=err,
        )  # fmt: skip
        peak = 0.0
        while process.poll() is None:
            peak = max(peak, _peak_rss_mib(process.pid) or 0.0)
            time.sleep(0.01)
        elapsed = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if process.returncode != 0:
        raise RuntimeError(f"import_turns failed: {stderr[-2000:]}")
    return elapsed, stdout.strip().splitlines()[-1], peak


def _python(tree: Path) -> str:
    return sys.executable if tree == ROOT else str(tree / ".venv" / "bin" / "python")


def empty_tables(conninfo: str) -> None:
    with psycopg.connect(conninfo) as conn:
        conn.execute("TRUNCATE ai_chat_logs, chat_sessions")


def read_back(conninfo: str) -> dict[str, tuple[list[str], dict[str, str], list[list[Any]]]]:
    """The rows import wrote (sessions and logs, every column, JSON as text), to insert again."""
    tables = {}
    with psycopg.connect(conninfo) as conn:
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
    return tables


def floor(conninfo: str, tables: dict[str, tuple[list[str], dict[str, str], list[list[Any]]]]) -> float:
    """Insert the same rows with executemany in one transaction (a new connection, as a process would); seconds."""
    started = time.perf_counter()
    with psycopg.connect(conninfo) as conn, conn.transaction():
        for table, (names, types, rows) in tables.items():
            placeholders = ", ".join("%s::jsonb" if types[n] == "jsonb" else "%s" for n in names)
            conn.cursor().executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({placeholders})", rows)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=MIN_ROUNDS, help="alternated rounds of import and floor")
    parser.add_argument("--json-mb", type=float, default=20, help="size of the .json vs .jsonl comparison (0: skip)")
    parser.add_argument("--json-rounds", type=int, default=3, help="alternated rounds of the .json/.jsonl comparison")
    parser.add_argument(
        "--database-url", help=f"PostgreSQL server (default DATABASE_URL when postgres://, else {DEFAULT_SERVER_URL})"
    )
    parser.add_argument("--baseline", type=Path, help="another checkout (with its .venv) whose import_turns to time")
    args = parser.parse_args(argv)
    server_url = postgres_server_url(args.database_url)
    with (
        tempfile.TemporaryDirectory(prefix="silvia_bench_") as folder,
        scratch_postgres(server_url, "import") as (conninfo, django_url),
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
        fixed, _, _ = run_import(django_url, empty)
        _, summary, _ = run_import(django_url, jsonl)
        tables = read_back(conninfo)
        assert len(tables["ai_chat_logs"][2]) == args.records, (len(tables["ai_chat_logs"][2]), args.records)
        import_runs: list[float] = []
        floor_runs: list[float] = []
        baseline_runs: list[float] = []
        sides = ("import", "floor", *(("baseline",) if args.baseline else ()))
        for round_number in range(max(args.rounds, MIN_ROUNDS)):
            for side in sides if round_number % 2 == 0 else sides[::-1]:
                empty_tables(conninfo)
                if side == "import":
                    import_runs.append(run_import(django_url, jsonl)[0])
                elif side == "baseline":
                    baseline_runs.append(run_import(django_url, jsonl, args.baseline)[0])
                else:
                    floor_runs.append(floor(conninfo, tables))
        imported, floored = Timings(tuple(import_runs)), Timings(tuple(floor_runs))
        ratio = Ratio.inverse(imported, floored)
        n = args.records
        print(
            f"import_turns bench, PostgreSQL: {n} records ({jsonl.stat().st_size / 1e6:.1f} MB .jsonl), "
            f"{len(import_runs)} rounds"
        )
        print(
            imported.line("import_turns (child process, start-up included)", width=50)
            + f"  {n / imported.median:7.0f} turns/s"
        )
        print(
            floored.line("floor (executemany of the same rows, 1 transaction)", width=50)
            + f"  {n / floored.median:7.0f} turns/s"
        )
        print(f"  ({summary})")
        print(
            f"  import {n // 1000}k turns vs executemany: import/floor turns/s "
            + ratio.text(goal=GOAL_FLOOR, at_least=True)
        )
        if args.baseline:
            baselined = Timings(tuple(baseline_runs))
            print(
                baselined.line(f"import_turns of {args.baseline}", width=50) + f"  {n / baselined.median:7.0f} turns/s"
            )
            print(
                "  import time, this tree vs the baseline's: " + Ratio.of(imported, baselined).text(goal=GOAL_BASELINE)
            )
        steady = Timings(tuple(t - fixed for t in import_runs))
        print(
            f"  the command's start-up alone (an empty file): {fixed:.2f} s; without it "
            f"{n / steady.median:.0f} turns/s, {Ratio.inverse(steady, floored).value:.2f} of the floor",
            flush=True,
        )
        if args.json_mb:
            size = len(jsonl.read_bytes()) / len(records)
            big = derived_records(max(1, int(args.json_mb * 1e6 / (size * 1.4))), seed=4)
            as_json = Path(folder) / "turns.json"
            as_json.write_text(json.dumps(big, indent=2))
            as_jsonl = Path(folder) / "big.jsonl"
            as_jsonl.write_text("".join(json.dumps(r) + "\n" for r in big))
            del big
            memory: dict[str, list[float]] = {".json": [], ".jsonl": []}
            seconds: dict[str, list[float]] = {".json": [], ".jsonl": []}
            for round_number in range(args.json_rounds):
                for path in (as_jsonl, as_json) if round_number % 2 == 0 else (as_json, as_jsonl):
                    empty_tables(conninfo)
                    elapsed, _, peak = run_import(django_url, path)
                    seconds[path.suffix].append(elapsed)
                    memory[path.suffix].append(peak)
            print(
                f"import_turns .json list vs .jsonl: {len(json.loads(as_json.read_bytes()))} records, "
                f".json {as_json.stat().st_size / 1e6:.0f} MB, .jsonl {as_jsonl.stat().st_size / 1e6:.0f} MB, "
                f"{args.json_rounds} rounds"
            )
            peak_json, peak_jsonl = statistics.median(memory[".json"]), statistics.median(memory[".jsonl"])
            memory_ratio = peak_json / peak_jsonl
            print(
                f"  peak RSS of the import process: .jsonl {peak_jsonl:.0f} MiB "
                f"(range {min(memory['.jsonl']):.0f}-{max(memory['.jsonl']):.0f}), .json {peak_json:.0f} MiB "
                f"(range {min(memory['.json']):.0f}-{max(memory['.json']):.0f})"
            )
            print(
                f"  .json import peak memory vs .jsonl: {memory_ratio:.2f} "
                f"(goal <= {GOAL_JSON_MEMORY:g}: {'met' if memory_ratio <= GOAL_JSON_MEMORY else 'NOT MET'})"
            )
            json_t, jsonl_t = Timings(tuple(seconds[".json"])), Timings(tuple(seconds[".jsonl"]))
            print(json_t.line(".json list", width=20))
            print(jsonl_t.line(".jsonl", width=20))
            print(f"  .json time vs .jsonl: {Ratio.of(json_t, jsonl_t).text(goal=GOAL_JSON)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
