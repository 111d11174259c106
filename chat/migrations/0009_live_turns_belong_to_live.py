"""Live turns belong to `live` (issue 37): `chat` forgets the models, the tables stay.

State only, after `live` 0001 took the models over (same tables, indexes
and constraints): nothing in the database changes.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0008_live_turn_task_and_progress"),
        ("live", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="liveturnevent", name="turn"),
                migrations.DeleteModel(name="LiveTurn"),
                migrations.DeleteModel(name="LiveTurnEvent"),
            ],
            database_operations=[],
        ),
    ]
