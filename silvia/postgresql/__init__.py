"""Django's PostgreSQL backend with a connection pool that checks connections without a round trip."""
