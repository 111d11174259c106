"""`manage.py erase_user_chats <username> [--dry-run]`: erase one user's chat data whole (docs/privacy.md)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from live.erasure import user_chats_erase


class Command(BaseCommand):
    help = (
        "Erase every chat session of a user: sessions, turns, live turns, their events and checkpoints "
        "(a running turn is stopped first). The user and their accounts stay."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--dry-run", action="store_true", help="count what would be erased; change nothing")

    def handle(self, *args: Any, username: str, dry_run: bool, **options: Any) -> None:
        user_model = get_user_model()
        user = user_model.objects.filter(**{user_model.USERNAME_FIELD: username}).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        erased = user_chats_erase(user=user, dry_run=dry_run)
        verb = "would erase" if dry_run else "erased"
        self.stdout.write(f"{username}: {verb} {erased.summary()}")
