"""Data migration: type old citations by their source (docs/backfill.md).

Data only, apart from any schema migration, and not atomic: each batch
commits on its own, so a deploy never holds long locks, and a deploy that
dies half-way is finished by the next `migrate` or by
`manage.py backfill_citation_targets`. For tables too big for a deploy
window, fake this migration (`migrate chat 0002 --fake`) and run the command.

The code it runs is frozen in `chat/migrations/_frozen_0002_backfill.py`
(no import of `chat` or `citations`), so later changes to the app never
change what this migration does.
"""

import logging

from django.db import migrations

from chat.migrations._frozen_0002_backfill import backfill_0002

logger = logging.getLogger(__name__)


def backfill_targets(apps, schema_editor):
    # The historical model: a migration must not use the live `ChatLog`.
    scanned, changed = backfill_0002(apps.get_model("chat", "ChatLog"), schema_editor.connection.alias)
    if scanned:
        logger.info("backfill_citation_targets: %d rows scanned, %d changed", scanned, changed)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("chat", "0001_initial")]

    operations = [migrations.RunPython(backfill_targets, migrations.RunPython.noop, elidable=True)]
