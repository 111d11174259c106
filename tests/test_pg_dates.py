"""`silvia.postgresql`'s `timestamptz` loader: Django's values, read by psycopg's compiled parser."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from django.db import connection
from django.db.backends.postgresql.psycopg_any import BaseTzLoader

from silvia.postgresql.base import TzLoader

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only")

# Offsets (whole hours, half hours, seconds), microseconds, old and far dates.
LITERALS = [
    "2026-11-02 00:00:00+00:00",
    "2026-11-02 23:59:59.999999+05:30",
    "2026-03-29 01:30:00.500000-09:00",
    "1883-11-18 12:03:58+00:03:58",
    "1900-01-01 00:00:00+00:00",
    "9999-12-30 00:00:00+00:00",
]


def _read(time_zone: str, loader: type | None) -> list[dt.datetime]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('TimeZone', %s, false)", [time_zone])
        try:
            if loader is not None:
                cursor.cursor.adapters.register_loader("timestamptz", loader)
            cursor.execute("SELECT " + ", ".join(f"'{value}'::timestamptz" for value in LITERALS))
            return list(cursor.fetchone())
        finally:
            cursor.execute("SELECT set_config('TimeZone', 'UTC', false)")


@pytest.mark.django_db
@pytest.mark.parametrize("time_zone", ["UTC", "Asia/Kolkata", "America/Anchorage"])
def test_dates_read_as_djangos_own_loader_reads_them(time_zone):
    class DjangoLoader(BaseTzLoader):
        timezone = connection.timezone

    ours, djangos = _read(time_zone, None), _read(time_zone, DjangoLoader)
    assert ours == djangos
    assert [value.tzinfo for value in ours] == [value.tzinfo for value in djangos] == [dt.UTC] * len(LITERALS)
    # The value as the connection writes it, in its zone, then given Django's zone (UTC) as it is:
    # Django's values come from connections it set to UTC, where that changes nothing.
    zone = zoneinfo.ZoneInfo(time_zone)
    assert ours == [dt.datetime.fromisoformat(value).astimezone(zone).replace(tzinfo=dt.UTC) for value in LITERALS]


@pytest.mark.django_db
def test_a_utc_connection_loads_with_the_compiled_parser_alone():
    with connection.cursor() as cursor:
        loader = cursor.cursor.adapters.get_loader(1184, 0)(1184, cursor.cursor)
    assert isinstance(loader, TzLoader) and loader.timezone is dt.UTC
    assert getattr(loader.load, "__self__", None) is not loader  # the parser's own method: no Python step per value
    assert loader.load(b"2026-11-02 00:00:00.25+01") == dt.datetime(2026, 11, 1, 23, 0, 0, 250000, tzinfo=dt.UTC)
