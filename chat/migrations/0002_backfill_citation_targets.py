"""Data migration: type old citations by their source (SPEC section 12).

Data only, apart from any schema migration, and not atomic: each batch of
`chat.backfill.backfill_citation_targets` commits on its own, so a deploy
never holds long locks, and a deploy that dies half-way is finished by the
next `migrate` or by `manage.py backfill_citation_targets` (the same
function). For tables too big for a deploy window, fake this migration
(`migrate chat 0002 --fake`) and run the command instead.
"""
import logging

from django.db import migrations

logger = logging.getLogger(__name__)


def backfill_targets(apps, schema_editor):
    # Imported here, and given the historical model: a migration must not
    # use the live `ChatLog`, whose fields may have moved on since.
    from chat.backfill import backfill_citation_targets

    report = backfill_citation_targets(model=apps.get_model("chat", "ChatLog"), using=schema_editor.connection.alias)
    if report.rows_scanned:
        logger.info(
            "backfill_citation_targets: %d rows scanned, %d changed, %d malformed rows skipped",
            report.rows_scanned,
            report.rows_changed,
            len(report.malformed),
        )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("chat", "0001_initial")]

    operations = [migrations.RunPython(backfill_targets, migrations.RunPython.noop, elidable=True)]
