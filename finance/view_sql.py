"""The SQL of the three views the `execute_sql` tool reads (SPEC 3, 13). FROZEN.

Migration 0002 creates the views from these strings, and the SQLite path of
the tool builds its per-user copies from the same bodies, so the columns can
never differ between the two. Changing a view means a new migration with a
new copy of this module; do not edit it in place.

The bodies are plain SQL that PostgreSQL and SQLite both run. `{where}` is
empty in the views (PostgreSQL filters them with row-level security) and is a
user filter in the SQLite copies.
"""
from __future__ import annotations

VIEW_NAMES: tuple[str, ...] = ("account_details", "holding_details", "public_holding_details")

# How a row names its account, as each provider's own tables spell it (SPEC 3):
# Plaid and SnapTrade call it `account_id`, SnapTrade also
# `snaptrade_account_id`, the manual store `manual_account_uuid`/`account_uuid`.
# A wallet (any other source) fills only `source_account_id`.
_ACCOUNT_COLUMNS = """
    c.source AS source,
    a.source_account_id AS source_account_id,
    CASE WHEN c.source IN ('plaid', 'snaptrade') THEN a.source_account_id END AS account_id,
    CASE WHEN c.source = 'snaptrade' THEN a.source_account_id END AS snaptrade_account_id,
    CASE WHEN c.source = 'manual' THEN a.source_account_id END AS manual_account_uuid,
    CASE WHEN c.source = 'manual' THEN a.source_account_id END AS account_uuid,
    a.name AS account_name,
    NULLIF(a.display_name, '') AS account_display_name,
    NULLIF(a.official_name, '') AS account_official_name,
    NULLIF(c.institution_name, '') AS institution_name"""

ACCOUNT_DETAILS = f"""SELECT{_ACCOUNT_COLUMNS},
    NULLIF(a.official_name, '') AS official_name,
    a.type AS type,
    NULLIF(a.subtype, '') AS subtype,
    NULLIF(a.mask, '') AS mask,
    a.currency AS currency,
    a.current_balance AS current_balance,
    a.available_balance AS available_balance,
    a.credit_limit AS credit_limit,
    a.purchase_apr AS purchase_apr,
    a.interest_rate AS interest_rate,
    a.origination_date AS origination_date,
    a.monthly_payment AS monthly_payment,
    a.escrow_payment AS escrow_payment,
    a.escrow_balance AS escrow_balance,
    a.remaining_term_months AS remaining_term_months,
    a.contributions_ytd AS contributions_ytd,
    a.updated_at AS updated_at,
    NULLIF(c.clerk_id, '') AS clerk_id,
    NULLIF(c.item_id, '') AS item_id,
    NULLIF(c.access_token, '') AS access_token
FROM finance_account a
JOIN finance_connection c ON c.id = a.connection_id
{{where}}"""

HOLDING_DETAILS = f"""SELECT{_ACCOUNT_COLUMNS},
    a.type AS account_type,
    NULLIF(s.ticker, '') AS ticker,
    s.name AS security_name,
    s.type AS security_type,
    h.quantity AS quantity,
    h.institution_price AS institution_price,
    h.institution_value AS institution_value,
    h.cost_basis AS cost_basis,
    h.currency AS currency,
    h.updated_at AS updated_at,
    NULLIF(c.clerk_id, '') AS clerk_id,
    NULLIF(c.item_id, '') AS item_id
FROM finance_holding h
JOIN finance_account a ON a.id = h.account_id
JOIN finance_connection c ON c.id = a.connection_id
JOIN finance_security s ON s.id = h.security_id
{{where}}"""

# Exchange-listed securities only, valued at the public close price.
PUBLIC_HOLDING_DETAILS = f"""SELECT{_ACCOUNT_COLUMNS},
    s.ticker AS ticker,
    s.name AS security_name,
    s.type AS security_type,
    s.exchange AS exchange,
    h.quantity AS quantity,
    s.close_price AS close_price,
    s.close_price_as_of AS close_price_as_of,
    ROUND(h.quantity * s.close_price, 2) AS market_value,
    h.institution_value AS institution_value,
    s.currency AS currency,
    NULLIF(c.clerk_id, '') AS clerk_id
FROM finance_holding h
JOIN finance_account a ON a.id = h.account_id
JOIN finance_connection c ON c.id = a.connection_id
JOIN finance_security s ON s.id = h.security_id
WHERE s.exchange <> '' AND s.ticker <> ''
{{and_where}}"""

VIEW_BODIES: dict[str, str] = {
    "account_details": ACCOUNT_DETAILS,
    "holding_details": HOLDING_DETAILS,
    "public_holding_details": PUBLIC_HOLDING_DETAILS,
}

USER_TABLES: tuple[str, ...] = ("finance_connection", "finance_account", "finance_holding")
"""The tables holding a user's rows (a `user_id` column each), filtered by row-level security."""

PUBLIC_TABLES: tuple[str, ...] = ("finance_security",)


def view_body(name: str, *, user_filter: str = "") -> str:
    """The SELECT of view `name`; `user_filter` (e.g. `a.user_id = %s`) keeps one user's rows, empty keeps all."""
    body = VIEW_BODIES[name]
    return body.replace("{where}", f"WHERE {user_filter}" if user_filter else "").replace(
        "{and_where}", f"AND {user_filter}" if user_filter else ""
    )


def quote_ident(name: str) -> str:
    """`name` as a double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def role_names(database_name: str, reader: str = "", view_owner: str = "") -> tuple[str, str]:
    """(reader role, view owner role): the given names, else derived from the database name.

    Roles are cluster-wide, so the default names carry the database name and
    two databases on one server never share (or race to create) a role.
    """
    base = database_name[:48]
    return reader or f"{base}_sql_reader", view_owner or f"{base}_sql_views"


def postgres_setup_statements(*, schema: str, reader: str, view_owner: str) -> list[str]:
    """The statements that create the views, the roles, the scope binding and the policies (PostgreSQL)."""
    r, o, s = quote_ident(reader), quote_ident(view_owner), quote_ident(schema)
    statements = []
    for role in (reader, view_owner):
        literal = "'" + role.replace("'", "''") + "'"
        statements.append(
            "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
            f"{literal}) THEN CREATE ROLE {quote_ident(role)} NOLOGIN NOSUPERUSER NOINHERIT NOCREATEDB "
            "NOCREATEROLE NOREPLICATION NOBYPASSRLS; END IF; END $$"
        )
        # The app's login role switches to the reader (SET LOCAL ROLE) and
        # hands the views to their owner: both need its membership.
        statements.append(f"GRANT {quote_ident(role)} TO CURRENT_USER")
    statements += [
        # The per-call binding: one uncommitted row, written by the app in the
        # tool's transaction, read by the policies. The reader can neither
        # write it (no privilege, read-only transaction) nor see another
        # session's (never committed).
        "CREATE TABLE finance_sql_scope (pid integer NOT NULL, user_id bigint NOT NULL)",
        "REVOKE ALL ON finance_sql_scope FROM PUBLIC",
        "CREATE FUNCTION finance_sql_scope_user() RETURNS bigint LANGUAGE sql STABLE SECURITY DEFINER "
        "SET search_path = pg_catalog, pg_temp AS "
        "$$ SELECT CASE WHEN count(*) = 1 THEN min(user_id) END "
        f"FROM {s}.finance_sql_scope WHERE pid = pg_backend_pid() $$",
        f"GRANT USAGE ON SCHEMA {s} TO {r}, {o}",
        f"GRANT EXECUTE ON FUNCTION finance_sql_scope_user() TO {o}",
    ]
    for table in (*USER_TABLES, *PUBLIC_TABLES):
        statements.append(f"GRANT SELECT ON {table} TO {o}")
    for table in USER_TABLES:
        statements += [
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            # Only the view owner is filtered; the app, owner of the tables,
            # is not subject to RLS and reads through the ORM as before.
            f"CREATE POLICY {table}_scope ON {table} FOR SELECT TO {o} "
            "USING (user_id = (SELECT finance_sql_scope_user()))",
        ]
    for name in VIEW_NAMES:
        statements += [
            f"CREATE VIEW {name} WITH (security_barrier) AS {view_body(name)}",
            f"ALTER VIEW {name} OWNER TO {o}",
            f"REVOKE ALL ON {name} FROM PUBLIC",
            f"GRANT SELECT ON {name} TO {r}",
        ]
    return statements


def postgres_teardown_statements(*, view_owner: str) -> list[str]:
    """The reverse of `postgres_setup_statements` (the roles stay: they are cluster-wide)."""
    statements = [f"DROP VIEW IF EXISTS {name}" for name in reversed(VIEW_NAMES)]
    for table in USER_TABLES:
        statements += [f"DROP POLICY IF EXISTS {table}_scope ON {table}", f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY"]
    o = quote_ident(view_owner)
    statements += [f"REVOKE ALL ON {table} FROM {o}" for table in (*USER_TABLES, *PUBLIC_TABLES)]
    statements += ["DROP FUNCTION IF EXISTS finance_sql_scope_user()", "DROP TABLE IF EXISTS finance_sql_scope"]
    return statements
