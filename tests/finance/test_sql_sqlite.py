"""Every SQLite call ends by its limit (docs/sql-tool.md#every-call-ends-by-its-limit, issue 20).

SQLite's progress handler only runs between VDBE steps, so one function call
must be short too. Each query below runs as the live runner runs a tool (in
a worker thread, waited for); it must end by itself within the time limit,
measured in CPU seconds of its thread, leave no CPU burning once it has
returned, and leave the user's private copy free for the next query.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time

import pytest
from django.db import connection

from citations.tools import ToolError
from finance import sql_sqlite
from finance.sql_sqlite import LIKE_PATTERN_CHARS
from finance.sql_sqlite_calls import TRIM_CHARS, printf_sizes
from finance.sql_tool import ExecuteSqlTool

pytestmark = pytest.mark.skipif(connection.vendor != "sqlite", reason="PostgreSQL's statement_timeout holds")

LIMIT_MS = 1000
# CPU a query may use past its limit: between two checks of the deadline
# (`PROGRESS_STEPS`), a few short calls of a few milliseconds each.
CPU_SLACK_SECONDS = 0.5
TOO_WIDE = "printf(): a width or precision of {} is more than 65536 (FINANCE_SQL_MAX_VALUE_CHARS)"
STOPPED = "the query ran longer than 1 s and was stopped"
# Each row a new value, so that SQLite cannot compute the call once for all rows.
FOREVER = "WITH RECURSIVE r(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM r) SELECT count(*) AS c FROM r WHERE "
BIG = "printf('%.*c', 65000 - n % 2, 'a')"

WIDTH_FAMILY = {
    "precision of %c": ("SELECT printf('%.*c', 2000000000, 'x') AS s", TOO_WIDE.format(2000000000)),
    "format()": (
        "SELECT format('%.*c', 2000000000, 'x') AS s",
        TOO_WIDE.replace("printf", "format").format(2000000000),
    ),
    "width and precision": ("SELECT printf('%*.*c', 5, 2000000000, 'x') AS s", TOO_WIDE.format(2000000000)),
    "negative width": ("SELECT printf('%*d', -2000000000, 1) AS s", TOO_WIDE.format(2000000000)),
    "literal width": ("SELECT printf('%2000000000d', 1) AS s", TOO_WIDE.format(2000000000)),
    "literal precision": ("SELECT printf('%.100000000f', 1.5) AS s", TOO_WIDE.format(100000000)),
    "width as text": ("SELECT printf('%.*c', '2000000000', 'x') AS s", TOO_WIDE.format(2000000000)),
    "template as a blob": ("SELECT printf(X'252E2A63', 2000000000, 'x') AS s", TOO_WIDE.format(2000000000)),
    "template from a column": (
        "SELECT printf(t, 2000000000, 'x') AS s FROM (SELECT '%' || '.*c' AS t)",
        TOO_WIDE.format(2000000000),
    ),
    "trim set": (
        f"SELECT trim('abc', printf('%.*c', {TRIM_CHARS + 1}, 'b')) AS s",
        "trim(): more than 100 characters to remove",
    ),
    "rtrim set": (
        "SELECT rtrim('abc', printf('%.*c', 5000, 'b')) AS s",
        "rtrim(): more than 100 characters to remove",
    ),
    "replace amplification": (
        "SELECT replace(printf('%.*c', 60000, 'a'), 'a', 'aaaa') AS s",
        "a value or row is longer than 65536 characters (FINANCE_SQL_MAX_VALUE_CHARS)",
    ),
    "zeroblob": ("SELECT zeroblob(1000000000) AS s", None),
    "randomblob": ("SELECT randomblob(1000000000) AS s", None),
    # The worst calls the caps allow, one per row, for ever: stopped by the deadline.
    "widest printf per row": (f"{FOREVER} length(printf('%.*c', 65535 - n % 2, 'a')) > 0", STOPPED),
    "widest trim per row": (f"{FOREVER} trim({BIG}, printf('%.*c', {TRIM_CHARS - 1}, 'b') || 'a') = ''", STOPPED),
    "longest LIKE per row": (
        f"{FOREVER} {BIG} LIKE '%' || printf('%.*c', {LIKE_PATTERN_CHARS - 2}, 'a') || 'b'",
        STOPPED,
    ),
    "longest GLOB per row": (
        f"{FOREVER} {BIG} GLOB '*' || printf('%.*c', {LIKE_PATTERN_CHARS - 2}, 'a') || 'b'",
        STOPPED,
    ),
    "worst instr per row": (f"{FOREVER} instr({BIG}, printf('%.*c', 32000, 'a') || 'b') > 0", STOPPED),
    "worst replace per row": (f"{FOREVER} length(replace({BIG}, printf('%.*c', 32000, 'a') || 'b', 'c')) > 0", STOPPED),
    "group_concat": (f"{FOREVER.replace('count(*)', 'length(group_concat(' + BIG + '))')} 1", None),
}


def _run_as_the_runner_does(tool: ExecuteSqlTool, query: str, user) -> tuple[object, float]:
    """(the output or the ToolError, CPU seconds of the thread that ran it); the thread must end by itself."""

    def call() -> tuple[object, float]:
        started = time.thread_time()
        try:
            outcome: object = tool.run({"query": query}, user=user)
        except ToolError as error:
            outcome = error
        return outcome, time.thread_time() - started

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        # The live runner's tool timeout is 30 s; the query must end long before, by its own limit.
        return pool.submit(call).result(timeout=LIMIT_MS / 1000 + 10)


@pytest.mark.parametrize("case", list(WIDTH_FAMILY), ids=list(WIDTH_FAMILY))
def test_each_call_ends_by_its_limit_and_stops_using_cpu(finance_users, case):
    maya, _ = finance_users
    query, reason = WIDTH_FAMILY[case]
    tool = ExecuteSqlTool(timeout_ms=LIMIT_MS)
    threads_before = threading.active_count()
    outcome, cpu = _run_as_the_runner_does(tool, query, maya)
    assert isinstance(outcome, ToolError), outcome
    if reason is not None:
        assert outcome.reason == reason
    assert cpu < LIMIT_MS / 1000 + CPU_SLACK_SECONDS, f"{case}: {cpu:.2f} s of CPU"
    # Nothing keeps running once the call has returned: the query ran in the caller's thread, which has ended,
    # and no other thread was left behind.
    assert threading.active_count() == threads_before
    # The private copy is free: the next query runs and answers.
    assert tool.run({"query": "SELECT count(*) AS n FROM holding_details"}, user=maya)["rows"] == [{"n": 6}]


def test_calls_under_the_caps_answer_as_sqlite_does(finance_users):
    maya, _ = finance_users
    tool = ExecuteSqlTool(timeout_ms=LIMIT_MS)
    query = (
        "SELECT printf('%5.2f|%-4d|%,d|%.3s|%%|%*d', 3.14159, 7, 1234567, 'abcdef', 3, 9) AS p, "
        "format('%05d', 42) AS f, trim('xxhixx', 'x') AS t, ltrim('  a') AS l, rtrim('ayy', 'y') AS r, "
        "printf('%.*c', 3, 'z') AS c, printf(NULL) AS n"
    )
    assert tool.run({"query": query}, user=maya)["rows"] == [
        {"p": " 3.14|7   |1,234,567|abc|%|  9", "f": "00042", "t": "hi", "l": "a", "r": "a", "c": "zzz", "n": None}
    ]


@pytest.mark.parametrize(
    ("template", "args", "sizes"),
    [
        ("%d and %s", (1, "x"), []),
        ("%5.2f", (1.5,), [5, 2]),
        ("%*.*c", (7, -9, "x"), [7, 9]),
        ("%% %.*c", (3, "x"), [3]),
        ("%d %*d", (123456789, 4, 1), [4]),  # the first argument is a value, not a width
        ("%.*c", ("12abc",), [12]),
        ("%.*c", (2.9e9,), [2900000000]),
        ("%.*c", (None,), [0]),
        ("%!,-08.3lld", (5,), [8, 3]),
        ("%" + "9" * 5000 + "d", (1,), [2**63]),
    ],
)
def test_printf_sizes(template, args, sizes):
    assert printf_sizes(template, args) == sizes


def test_a_busy_copy_is_an_error_not_a_wait(finance_users):
    maya, _ = finance_users
    tool = ExecuteSqlTool(timeout_ms=300)
    tool.run({"query": "SELECT 1 AS one"}, user=maya)
    [copy] = sql_sqlite._copies.values()
    with copy.lock:  # another query of maya's holds her copy
        started = time.monotonic()
        with pytest.raises(ToolError) as caught:
            tool.run({"query": "SELECT 1 AS one"}, user=maya)
    assert caught.value.reason == "another query of yours is still running (each may run 0.3 s)"
    assert 0.3 <= time.monotonic() - started < 2
