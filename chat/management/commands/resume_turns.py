"""`python manage.py resume_turns [--stale-seconds N]`: finish turns whose worker died (issue 10)."""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from chat.live.service import start_worker, turn_claim_stale, wait_for_workers
from chat.models import LiveTurn


class Command(BaseCommand):
    help = (
        "Resume running live turns whose heartbeat is older than LIVE_TURN_STALE_SECONDS (or --stale-seconds) "
        "from their last checkpoint, and wait for them to end. Safe to run from several hosts at once: each "
        "turn is claimed by exactly one resumer."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--stale-seconds", type=float, default=None, help="heartbeat age that counts as dead")
        parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the resumed turns")

    def handle(self, *args, stale_seconds: float | None, timeout: float, **options) -> None:
        claimed = turn_claim_stale(stale_seconds=stale_seconds)
        for turn_id, token in claimed:
            start_worker(turn_id, token)
        finished = wait_for_workers(timeout)
        statuses = LiveTurn.objects.filter(pk__in=[turn_id for turn_id, _ in claimed]).values_list("status", flat=True)
        done = sum(1 for status in statuses if status == "done")
        failed = sum(1 for status in statuses if status == "failed")
        still = "" if finished else " (some still running at the timeout)"
        self.stdout.write(f"resumed {len(claimed)} turn(s): {done} done, {failed} failed{still}")
