"""The live turns' admin lists running, failed and resumed turns (issue 10)."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth import get_user_model

from live.models import LiveTurn, LiveTurnStatus


@pytest.fixture
def staff_client(client, db):
    admin_user = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client.force_login(admin_user)
    return client


def test_lists_and_filters_turns(staff_client, maya):
    def make(status, resumes, message):
        return LiveTurn.objects.create(
            session_id=uuid.uuid4(),
            user=maya,
            user_message=message,
            prompt_version="v5",
            status=status,
            resume_count=resumes,
            error={"type": "overloaded_error", "message": "m"} if status == LiveTurnStatus.FAILED else None,
        )

    running = make(LiveTurnStatus.RUNNING, 0, "a")
    failed, resumed = make(LiveTurnStatus.FAILED, 0, "b"), make(LiveTurnStatus.DONE, 2, "c")
    cut = make(LiveTurnStatus.DONE, 0, "d")
    LiveTurn.objects.filter(pk=cut.pk).update(stop_reason="max_tokens")
    page = staff_client.get("/admin/live/liveturn/").content.decode()
    assert all(str(t.id) in page for t in (running, failed, resumed))
    page = staff_client.get("/admin/live/liveturn/?status__exact=failed").content.decode()
    assert str(failed.id) in page and str(running.id) not in page and "overloaded_error" in page
    page = staff_client.get("/admin/live/liveturn/?stop_reason=max_tokens").content.decode()
    assert str(cut.id) in page and str(resumed.id) not in page
    page = staff_client.get("/admin/live/liveturn/?resumed=yes").content.decode()
    assert str(resumed.id) in page and str(failed.id) not in page
    detail = staff_client.get(f"/admin/live/liveturn/{failed.id}/change/")
    assert detail.status_code == 200 and "not stored" in detail.content.decode()
    assert staff_client.get("/admin/live/liveturn/add/").status_code == 403
