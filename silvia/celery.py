"""The Celery app (docs/job-engine.md): live turns run as tasks in `celery -A silvia worker` processes.

Configured the documented Django way: every `CELERY_*` setting of
`silvia/settings.py`, and the tasks of each app's `tasks.py`. Not imported
by `silvia/__init__.py` (Celery's template does that) so that a management
command or a web process does not load Celery until it queues a turn.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from typing import Any

from celery import Celery, bootsteps, signals
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from silvia.startup import BrokerUnavailable, StartupError, require_broker, require_database, url_problem
from telemetry.tracing import start_tracing, stop_tracing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "silvia.settings")


def require_metrics_folder() -> None:
    """Refuse to start a web or worker process (both load this module) whose `PROMETHEUS_MULTIPROC_DIR` is
    not a directory (docs/metrics.md). prometheus-client would fail every request, /healthz too, and every
    turn at its first figure, with an error whose text the log filter withholds. `manage.py` commands are
    not refused: a release runs `migrate` and `check --deploy` before the folder is made for the start."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder and not os.path.isdir(folder):
        raise ImproperlyConfigured(
            f"PROMETHEUS_MULTIPROC_DIR={folder} is not a directory: create it (empty) before the processes "
            "start, e.g. `rm -rf DIR && mkdir -p DIR` (docs/metrics.md), or unset it for one process's figures."
        )


require_metrics_folder()


def check_servers() -> StartupError | None:
    """What a starting web or worker process (both load this module) says about its servers, on one line of
    stderr (silvia/startup.py; docs/deploying.md#start-up-errors), within 2 s: a broker URL that names no kombu
    transport stops the process; a database that does not answer is said once and returned, and a web process
    serves on (`/healthz` alive, `/readyz` 503 until it answers), while `celery worker` stops (below)."""
    from kombu.transport import TRANSPORT_ALIASES

    schemes = tuple(sorted(TRANSPORT_ALIASES))
    try:
        broker_url = settings.CELERY_BROKER_URL  # the settings load here in a worker: a bad URL is one line too
    except ImproperlyConfigured as error:
        sys.exit(f"{type(error).__name__}: {error}")
    problem = (
        None
        if settings.CELERY_BROKER_EMBEDDED
        else url_problem("CELERY_BROKER_URL", broker_url, schemes, "amqp://host:5672/")
    )
    if problem:
        sys.exit(f"{BrokerUnavailable.__name__}: {problem}")
    try:
        require_database()
    except StartupError as error:
        print(f"{type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return error
    return None


_database_problem = check_servers()
# Traces (docs/metrics.md#traces): on in the web and worker processes when an OTLP endpoint is configured;
# with none, nothing of OpenTelemetry is loaded. A bad OTEL_* value refuses the start with the SDK's words.
# After the settings (check_servers loads them): they read `.env` into the environment, where the SDK
# finds its variables (the worker imports this module before anything loads them).
start_tracing()

app = Celery("silvia")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

logger = logging.getLogger("silvia.worker")


@signals.celeryd_init.connect
def _broker_answers(sender: Any = None, conf: Any = None, **kwargs: Any) -> None:
    # `celery worker` only (not an embedded test worker), before it connects: a database that did not answer
    # (said once, above) or a broker that refuses is one line and exit status 1 within 2 s, where Celery would
    # retry the broker for ever and fail each turn on the database (docs/deploying.md#start-up-errors).
    if _database_problem is not None:
        sys.exit(1)  # said when this module loaded
    if settings.CELERY_BROKER_EMBEDDED:
        return  # a SQLite file of this machine: nothing to reach (readiness checks its folder)
    try:
        require_broker(str(app.conf.broker_url))
    except StartupError as error:
        sys.exit(f"{type(error).__name__}: {error}")


@signals.worker_ready.connect
def _worker_ready(sender: Any = None, **kwargs: Any) -> None:
    # The turn runner (and the SDK with it, about a second of imports) is loaded now, not by
    # the first turn this worker takes.
    import live.runner  # noqa: F401
    from live.configured import warn_if_no_model
    from live.sweeps import requeue_orphans

    warn_if_no_model()
    _sweep()  # at once, then on the timer (PeriodicSweep)
    if settings.CELERY_BROKER_EMBEDDED:
        try:
            # The embedded transport has no redelivery: the turns a stopped embedded worker
            # held (or had taken from the folder) are sent again, to start or resume.
            requeued = requeue_orphans()
        except Exception as error:  # the database is down: the sweeps end those turns later
            logger.error("the embedded worker's requeue of a stopped worker's turns failed (%s)", type(error).__name__)
        else:
            if requeued:
                logger.warning("embedded worker: %d turn(s) a stopped worker held queued again", requeued)
    # What the worker loaded to start (Django, the SDK, the turn runner) is kept for its life: out of the
    # cyclic collector's full passes, which walked it all (docs/deploying.md#the-heap-a-process-starts-with).
    gc.freeze()


def _sweep() -> None:
    """One sweep of the turns (`live.sweeps.sweep`): sent again, stuck ended; logged, never raised."""
    from live.sweeps import sweep

    try:
        resent, ended = sweep()
    except Exception as error:  # the database is down: the next sweep tries again
        logger.error("the sweep of live turns failed (%s)", type(error).__name__)
        return
    if ended:
        logger.warning("%d stuck turn(s) ended", ended)
    if resent:
        logger.warning("%d turn(s) whose task never reached the broker sent again", resent)


def _queue_retention_pass() -> None:
    """Queue the retention pass (`silvia.retention_pass`, docs/retention.md) as a task a worker thread runs:
    its batches take longer than a timer callback may."""
    from silvia.retention import retention_pass_task

    try:
        retention_pass_task.delay()
    except Exception as error:  # the broker refused it: the next interval queues it again
        logger.error("the retention pass could not be queued (%s)", type(error).__name__)


class PeriodicSweep(bootsteps.StartStopStep):
    """The engine's periodic home (docs/job-engine.md#the-workers-sweep): on the worker's own timer (Celery's
    documented bootstep API), every `LIVE_TURN_SWEEP_SECONDS` the sweep of live turns, and every
    `RETENTION_PASS_SECONDS` the retention pass queued. Every worker runs it; both are safe at once."""

    requires = ("celery.worker.components:Timer",)

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.entries: list[Any] = []

    def start(self, worker: Any) -> None:
        self.entries = []
        if settings.LIVE_TURN_SWEEP_SECONDS > 0:
            self.entries.append(worker.timer.call_repeatedly(settings.LIVE_TURN_SWEEP_SECONDS, _sweep, priority=10))
        if settings.RETENTION_PASS_SECONDS > 0:
            self.entries.append(
                worker.timer.call_repeatedly(settings.RETENTION_PASS_SECONDS, _queue_retention_pass, priority=10)
            )

    def stop(self, worker: Any) -> None:
        for entry in self.entries:
            entry.cancel()
        self.entries = []


app.steps["worker"].add(PeriodicSweep)


# Metrics (docs/metrics.md#the-turn-workers-figures): the worker's database pool is sampled around its
# tasks, as a web process samples it after requests (at most once a second); telemetry.metrics loads with the
# first task, not at the worker's start.
@signals.task_prerun.connect
@signals.task_postrun.connect
def _sample_pool(sender: Any = None, **kwargs: Any) -> None:
    from telemetry.metrics import sample_pool

    sample_pool()


# A process that stops takes its live gauges (the pool's connections) out of the sums at once: the worker
# itself (the threads pool runs every turn in it) and, with a forking pool, each child.
@signals.worker_shutdown.connect
@signals.worker_process_shutdown.connect
def _metrics_process_exit(sender: Any = None, **kwargs: Any) -> None:
    from telemetry.metrics import process_exiting

    process_exiting()


# Traces: a forked pool's child exports through its own provider; at its exit, the worker (or the child)
# exports the spans it still holds.
@signals.worker_process_init.connect
def _tracing_process_start(sender: Any = None, **kwargs: Any) -> None:
    start_tracing()


@signals.worker_shutdown.connect
@signals.worker_process_shutdown.connect
def _tracing_process_exit(sender: Any = None, **kwargs: Any) -> None:
    stop_tracing()
