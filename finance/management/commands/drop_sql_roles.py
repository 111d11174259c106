"""`python manage.py drop_sql_roles [--database-name NAME]`: the SQL tool's roles of a dropped database.

Arguments and printing only; the work is `finance.sql_roles.drop_database_roles` (docs/sql-tool.md#the-roles).
"""

from __future__ import annotations

from typing import Any, ClassVar

import psycopg
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from finance.libpq import libpq_params, maintenance_connection
from finance.sql_roles import DatabaseStillExistsError, drop_database_roles


class Command(BaseCommand):
    help = (
        "Drop the execute_sql tool's PostgreSQL roles (<database>_sql_reader, <database>_sql_views) of a database "
        "that was dropped: roles are cluster-wide and survive DROP DATABASE. Refuses while the database exists; "
        "leaves alone a role something still uses and the roles named in FINANCE_SQL_*_ROLE."
    )
    requires_system_checks: ClassVar[list[str]] = []  # type: ignore[misc]  # the database is gone: no checks

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--database-name",
            help="the dropped database (default: the NAME of DATABASE_URL); connects to the same server",
        )
        parser.add_argument(
            "--maintenance-db", default="postgres", help="the database to connect to meanwhile (default postgres)"
        )

    def handle(self, *args: Any, database_name: str | None, maintenance_db: str, **options: Any) -> None:
        if connection.vendor != "postgresql":
            self.stdout.write(f"{connection.vendor}: no roles to drop (the SQL tool's roles are PostgreSQL's)")
            return
        name = database_name or connection.settings_dict["NAME"]
        try:
            with maintenance_connection(libpq_params(connection.settings_dict), maintenance_db) as server:
                report = drop_database_roles(server, name)
        except DatabaseStillExistsError as error:
            raise CommandError(str(error)) from None
        except psycopg.errors.InsufficientPrivilege:
            raise CommandError("dropping a role needs CREATEROLE (or a superuser): connect as such a role") from None
        except psycopg.OperationalError as error:
            raise CommandError(f"cannot reach the PostgreSQL server ({type(error).__name__})") from None
        for role in report.dropped:
            self.stdout.write(f"dropped role {role}")
        for role in report.absent:
            self.stdout.write(f"role {role}: not there")
        for role in report.in_use:
            self.stderr.write(f"role {role}: still used by another database, left alone")
        if report.in_use:
            raise CommandError(f"{len(report.in_use)} role(s) still in use", returncode=1)
