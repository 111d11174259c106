"""Live turns' figures read from the database at scrape time (docs/metrics.md): `LiveTurnsCollector`.

The database already holds them, whichever process ran a turn; a gauge kept
by processes would be wrong after a worker is killed mid-turn. One indexed
GROUP BY per scrape. `/metrics` passes it to `telemetry.metrics.render`.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["LiveTurnsCollector"]


class LiveTurnsCollector(Collector):
    """Read at scrape time from the database: `silvia_live_turns{state}` (every `LiveTurnStatus`, 0 when none),
    `silvia_live_turns_failed{error_type}` and `silvia_live_turn_queue_depth` (turns `queued`: waiting
    for a job-engine worker, docs/job-engine.md)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from django.db.models import Count
        from django.db.models.fields.json import KT

        from live.models import LiveTurn, LiveTurnStatus

        by_state = dict(LiveTurn.objects.order_by().values_list("status").annotate(n=Count("pk")))
        states = GaugeMetricFamily("silvia_live_turns", "Live turns stored, by state.", labels=["state"])
        for status in LiveTurnStatus.values:
            states.add_metric([status], by_state.get(status, 0))
        yield states
        queue = GaugeMetricFamily("silvia_live_turn_queue_depth", "Live turns waiting for a worker (state queued).")
        queue.add_metric([], by_state.get(LiveTurnStatus.QUEUED, 0))
        yield queue
        failed = GaugeMetricFamily(
            "silvia_live_turns_failed", "Failed live turns stored, by the error event's type.", labels=["error_type"]
        )
        rows = (
            LiveTurn.objects.filter(status=LiveTurnStatus.FAILED)
            .order_by()
            .values_list(KT("error__type"))
            .annotate(n=Count("pk"))
        )
        for error_type, count in rows:
            failed.add_metric([str(error_type or "")], count)
        yield failed
