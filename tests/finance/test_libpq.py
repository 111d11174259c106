"""`finance.libpq`: psycopg's arguments from a `DATABASES` entry, and a real connection made with them."""

from __future__ import annotations

import pytest
from django.db import connection

from finance.libpq import libpq_params, maintenance_connection


def test_the_documented_keys_and_the_options_libpq_knows():
    settings_dict = {
        "ENGINE": "silvia.postgresql",
        "NAME": "silvia",
        "USER": "app",
        "PASSWORD": "",
        "HOST": "127.0.0.1",
        "PORT": 5432,
        "OPTIONS": {"pool": {"min_size": 2}, "isolation_level": 1, "sslmode": "require", "connect_timeout": 3},
        "CONN_MAX_AGE": 0,
    }
    assert libpq_params(settings_dict) == {
        "client_encoding": "UTF8",
        "dbname": "silvia",
        "user": "app",
        "host": "127.0.0.1",
        "port": 5432,
        "sslmode": "require",
        "connect_timeout": 3,
    }


def test_no_name_is_the_maintenance_database():
    assert libpq_params({"NAME": "", "OPTIONS": {}}) == {"client_encoding": "UTF8", "dbname": "postgres"}


@pytest.mark.django_db
def test_connects_to_the_test_database_as_django_does():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL: the suite runs on it when DATABASE_URL points at one")
    import psycopg

    with psycopg.connect(**libpq_params(connection.settings_dict)) as own:
        assert own.execute("SELECT current_database()").fetchone() == (connection.settings_dict["NAME"],)
    with maintenance_connection(libpq_params(connection.settings_dict)) as server:
        assert server.execute("SELECT current_database()").fetchone() == ("postgres",)
