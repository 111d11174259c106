"""gunicorn's settings for the Procfile's `web:` process (docs/deploying.md#processes-the-procfile).

gunicorn reads this file from the working directory. The `web` process serves the API, the pages and the
admin through Django's stock WSGI handler; the live turns' streams are the `stream` process's (uvicorn).
Threads (gthread): a request waits on the database, never on the model. `WEB_CONCURRENCY` processes
(gunicorn's own variable), `WEB_THREADS` threads each; `$PORT` is the port (gunicorn's default bind).
A thread reads its request's head with no deadline, so clients reach it only through a buffering proxy
(deploy/nginx.conf, docs/deploying.md#the-proxy-in-front).

The access log goes through Django's logging (`silvia.logging_config`: gunicorn.access carries the
privacy filter, which masks every path segment that is no word of the routes and the query string);
`DJANGO_ACCESS_LOG=false` turns it off.
"""

import os

worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
threads = int(os.environ.get("WEB_THREADS", "8"))
# A deploy's SIGTERM: requests in flight have this long to finish.
graceful_timeout = 30
timeout = 60
keepalive = 5
accesslog = "-"
# Only the request line (masked by the privacy filter), status, size and time: no referer, no user agent.
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms'


def child_exit(server: object, worker: object) -> None:
    """A worker process ended: in Prometheus multiprocess mode its live gauges stop counting
    (docs/metrics.md); prometheus-client's documented gunicorn hook."""
    from telemetry.metrics import process_dead

    process_dead(worker.pid)  # type: ignore[attr-defined]  # gunicorn's Worker
