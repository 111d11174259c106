"""What SQL the `execute_sql` tool lets through to PostgreSQL (SPEC 13).

The query is parsed with PostgreSQL's own parser (pglast, libpg_query) and
accepted only when it is one plain SELECT built from an allowlist of node
types, reading only the three views (or its own CTEs), calling only
allowlisted functions and casting only to allowlisted types. Everything else
(a second statement, writes, COPY, SET/RESET, `set_config`, `pg_read_file`,
`dblink`, advisory locks, `pg_sleep`, catalogs, other schemas, locking
clauses, SELECT INTO, XML functions, parameters) is refused here, before the
database sees it. The database enforces the scope again on its own (role,
row-level security, read-only transaction): this check is the first of two
walls, not the only one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pglast import ast, parse_sql
from pglast.enums import SQLValueFunctionOp
from pglast.parser import ParseError

from citations.tools import ToolError
from finance.view_sql import VIEW_NAMES

ALLOWED_FUNCTIONS: frozenset[str] = frozenset(
    """
    count sum avg min max string_agg array_agg bool_and bool_or every stddev stddev_pop stddev_samp
    variance var_pop var_samp percentile_cont percentile_disc mode corr covar_pop covar_samp
    row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
    abs round ceil ceiling floor trunc sign mod power pow sqrt cbrt exp ln log log10 div width_bucket
    lower upper length char_length character_length octet_length substring substr btrim ltrim rtrim
    replace concat concat_ws left right position strpos initcap split_part starts_with reverse translate
    to_char to_number to_date to_timestamp date_trunc date_part extract age now make_date make_interval
    make_timestamp justify_days justify_hours justify_interval timezone isfinite date_bin
    nullif coalesce greatest least array_length cardinality
    """.split()  # noqa: SIM905
)
"""Functions a query may call (unqualified or `pg_catalog.`): aggregates, windows, math, text, dates."""

ALLOWED_TYPES: frozenset[str] = frozenset(
    """
    int2 int4 int8 smallint integer int bigint numeric decimal float4 float8 real double
    text varchar char bpchar date time timetz timestamp timestamptz interval bool boolean
    """.split()  # noqa: SIM905
)
"""Types a query may cast to (`::numeric`, `CAST(x AS date)`)."""

_ALLOWED_VALUE_FUNCTIONS = frozenset(
    {
        SQLValueFunctionOp.SVFOP_CURRENT_DATE,
        SQLValueFunctionOp.SVFOP_CURRENT_TIME,
        SQLValueFunctionOp.SVFOP_CURRENT_TIME_N,
        SQLValueFunctionOp.SVFOP_CURRENT_TIMESTAMP,
        SQLValueFunctionOp.SVFOP_CURRENT_TIMESTAMP_N,
        SQLValueFunctionOp.SVFOP_LOCALTIME,
        SQLValueFunctionOp.SVFOP_LOCALTIME_N,
        SQLValueFunctionOp.SVFOP_LOCALTIMESTAMP,
        SQLValueFunctionOp.SVFOP_LOCALTIMESTAMP_N,
    }
)

# Every node type an ordinary analytical SELECT is made of. Anything else
# (RangeFunction, XmlExpr, ParamRef, LockingClause, IntoClause, DML, utility
# statements, ...) is refused whole.
_ALLOWED_NODES: frozenset[type] = frozenset(
    {
        ast.RawStmt,
        ast.SelectStmt,
        ast.ResTarget,
        ast.ColumnRef,
        ast.A_Star,
        ast.A_Const,
        ast.A_Expr,
        ast.BoolExpr,
        ast.FuncCall,
        ast.TypeCast,
        ast.TypeName,
        ast.RangeVar,
        ast.Alias,
        ast.JoinExpr,
        ast.SortBy,
        ast.SubLink,
        ast.CaseExpr,
        ast.CaseWhen,
        ast.CoalesceExpr,
        ast.MinMaxExpr,
        ast.NullTest,
        ast.BooleanTest,
        ast.WithClause,
        ast.CommonTableExpr,
        ast.RangeSubselect,
        ast.WindowDef,
        ast.SQLValueFunction,
        ast.A_ArrayExpr,
        ast.A_Indirection,
        ast.A_Indices,
        ast.CollateClause,
        ast.RowExpr,
        ast.GroupingSet,
        ast.String,
        ast.Integer,
        ast.Float,
        ast.Boolean,
        ast.BitString,
    }
)


def check_select(query: str) -> str:
    """The text of `query`'s one SELECT (no trailing `;`), or `ToolError` with the reason it is refused.

    Accepted only when it is one read-only SELECT over the views (see above).
    """
    try:
        statements = parse_sql(query)
    except (ParseError, RecursionError) as error:
        raise ToolError(f"syntax error: {error.args[0]}") from None
    if len(statements) != 1:
        raise ToolError("exactly one statement is allowed" if statements else "the query is empty")
    statement = statements[0].stmt
    if not isinstance(statement, ast.SelectStmt):
        raise ToolError(f"only SELECT is allowed, not {_statement_name(statement) if statement else 'this'}")
    try:
        _check(statement, frozenset())
    except RecursionError:
        raise ToolError("the query is nested too deeply") from None
    # Offsets count UTF-8 bytes; a length of 0 means "to the end".
    data = query.encode("utf-8")
    start = statements[0].stmt_location or 0
    end = start + statements[0].stmt_len if statements[0].stmt_len else len(data)
    return data[start:end].decode("utf-8")


def _statement_name(node: ast.Node) -> str:
    return type(node).__name__.removesuffix("Stmt").upper() or "this statement"


def _children(node: ast.Node) -> Iterator[tuple[str, object]]:
    for name in getattr(type(node), "__slots__", ()):
        yield name, getattr(node, name, None)


def _walk(value: object, ctes: frozenset[str]) -> None:
    if isinstance(value, ast.Node):
        _check(value, ctes)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _walk(item, ctes)


def _check(node: ast.Node, ctes: frozenset[str]) -> None:
    if type(node) not in _ALLOWED_NODES:
        raise ToolError(_refusal(node))
    if isinstance(node, ast.SelectStmt):
        if node.intoClause is not None:
            raise ToolError("SELECT INTO is not allowed")
        if node.lockingClause:
            raise ToolError("FOR UPDATE/SHARE is not allowed")
        if node.withClause is not None:
            ctes = _check_with(node.withClause, ctes)
    elif isinstance(node, ast.CommonTableExpr) and not isinstance(node.ctequery, ast.SelectStmt):
        raise ToolError("a WITH query may only SELECT")
    elif isinstance(node, ast.RangeVar):
        _check_relation(node, ctes)
    elif isinstance(node, ast.FuncCall):
        _check_function(node)
    elif isinstance(node, ast.TypeName):
        _check_type(node)
    elif isinstance(node, ast.SQLValueFunction) and node.op not in _ALLOWED_VALUE_FUNCTIONS:
        raise ToolError("only CURRENT_DATE/CURRENT_TIMESTAMP-style values are allowed")
    elif isinstance(node, ast.A_Expr) and node.name and len(node.name) > 1:
        raise ToolError("qualified operators are not allowed")
    for name, child in _children(node):
        if name == "withClause" and isinstance(node, ast.SelectStmt):
            continue  # walked by _check_with, each body seeing only the names in scope for it
        _walk(child, ctes)


def _check_with(clause: ast.WithClause, ctes: frozenset[str]) -> frozenset[str]:
    """Check each CTE body with the names it can see; returns the names the main query sees.

    A non-recursive CTE sees only the CTEs before it, so `WITH finance_account
    AS (SELECT * FROM finance_account)` reads the real table and is refused.
    """
    names = [cte.ctename for cte in clause.ctes or ()]
    for index, cte in enumerate(clause.ctes or ()):
        visible = names if clause.recursive else names[:index]
        _check(cte, ctes | frozenset(visible))
    return ctes | frozenset(names)


def _check_relation(node: ast.RangeVar, ctes: frozenset[str]) -> None:
    if node.schemaname or node.catalogname:
        raise ToolError(f"only {', '.join(VIEW_NAMES)} can be read (no schema names)")
    if node.relname not in VIEW_NAMES and node.relname not in ctes:
        raise ToolError(f"unknown table {node.relname!r}: only {', '.join(VIEW_NAMES)} can be read")


def _names(values: Any) -> list[str]:
    return [str(item.sval) for item in values or () if isinstance(item, ast.String)]


def _check_function(node: ast.FuncCall) -> None:
    names = _names(node.funcname)
    name = names[-1].lower() if names else ""
    qualified_ok = len(names) == 1 or (len(names) == 2 and names[0] == "pg_catalog")
    if not qualified_ok or name not in ALLOWED_FUNCTIONS:
        raise ToolError(f"function {'.'.join(names) or '?'}() is not allowed")


def _check_type(node: ast.TypeName) -> None:
    names = _names(node.names)
    name = names[-1].lower() if names else ""
    qualified_ok = len(names) == 1 or (len(names) == 2 and names[0] == "pg_catalog")
    if node.setof or node.pct_type or not qualified_ok or name not in ALLOWED_TYPES:
        raise ToolError(f"type {'.'.join(names) or '?'} is not allowed")


def _refusal(node: ast.Node) -> str:
    name = type(node).__name__
    if name.endswith("Stmt"):
        return f"only SELECT is allowed, not {_statement_name(node)}"
    if name == "RangeFunction":
        return "functions in FROM are not allowed"
    if name == "ParamRef":
        return "parameters ($1) are not allowed"
    return f"this construct is not allowed ({name})"
