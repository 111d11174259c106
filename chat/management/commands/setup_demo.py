"""`python manage.py setup_demo`: demo users, an API token and the example turns."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from chat.models import ChatSession
from finance.demo import seed_demo_finance

DEMO_USER = "maya"
DEMO_PASSWORD = "silvia-demo"  # noqa: S105 - signs in to the pages; a local demo only
OTHER_USER = "sam"
STAFF_USER = "admin"
STAFF_PASSWORD = "admin"  # noqa: S105 - the staff user of a local demo only


class Command(BaseCommand):
    help = (
        "Create the demo user 'maya' with an API token and demo financial data (and some for 'sam') "
        "and a staff user 'admin' (password 'admin', local demo only), import examples/turns, "
        "and print a curl command for one session. Safe to run again. Runs only with DJANGO_DEBUG=true: "
        "it creates users with known passwords."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--examples", type=Path, default=settings.BASE_DIR / "examples" / "turns")
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args, examples: Path, base_url: str, **options) -> None:
        if not settings.DEBUG:
            raise CommandError(
                f"setup_demo creates users with known passwords ({DEMO_USER}, {STAFF_USER}/{STAFF_PASSWORD}): "
                "it runs only on a development server (DJANGO_DEBUG=true), never on a production database"
            )
        users = get_user_model()
        maya, _ = users.objects.get_or_create(username=DEMO_USER)
        token, _ = Token.objects.get_or_create(user=maya)
        if not maya.password or not maya.has_usable_password():
            maya.set_password(DEMO_PASSWORD)
            maya.save(update_fields=["password"])
        if not users.objects.filter(username=STAFF_USER).exists():
            users.objects.create_superuser(STAFF_USER, password=STAFF_PASSWORD)

        sam, _ = users.objects.get_or_create(username=OTHER_USER)
        accounts = seed_demo_finance(maya=maya, sam=sam)
        self.stdout.write(f"Financial data: {accounts} accounts for {DEMO_USER} and {OTHER_USER}")

        call_command("import_turns", str(examples), create_users=True, stdout=self.stdout, stderr=self.stderr)

        session = ChatSession.objects.filter(user=maya).order_by("created_at").first()
        self.stdout.write("")
        self.stdout.write(f"API token for {DEMO_USER}: {token.key}")
        self.stdout.write("List the sessions:")
        self.stdout.write(f"  curl -s -H 'Authorization: Token {token.key}' {base_url}/api/chat/sessions/")
        if session is not None:
            self.stdout.write(f"One session with its citations and their targets ({session.title or session.id}):")
            self.stdout.write(
                f"  curl -s -H 'Authorization: Token {token.key}' {base_url}/api/chat/sessions/{session.id}/"
                " | python3 -m json.tool"
            )
        self.stdout.write(f"Pages: {base_url}/ (user {DEMO_USER}, password {DEMO_PASSWORD})")
        self.stdout.write(f"Admin: {base_url}/admin/ (user {STAFF_USER}, password {STAFF_PASSWORD})")
