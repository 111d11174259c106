"""Who may do what in the admin (issue #3): staff only, logs and sessions read-only, and the
`recompute_targets` action (the backfill: counts, idempotence, rows skipped, view-only staff refused).
Runs on SQLite and on PostgreSQL (DATABASE_URL)."""

from __future__ import annotations

import pytest
from django.test import Client

from chat.backfill import backfill_rows
from chat.models import ChatLog
from tests.chat.admin_support import LIST_URL, change_url, cite, listed, log_with
from tests.factories import ChatLogFactory, UserFactory


@pytest.mark.django_db
@pytest.mark.parametrize("path", [LIST_URL, "{change}", "/admin/chat/chatsession/"])
def test_non_staff_and_anonymous_are_sent_to_login(path):
    log = ChatLogFactory.create()
    url = path.format(change=change_url(log))
    member = UserFactory.create(username="member")  # a signed-in user who is not staff
    member_client = Client()
    member_client.force_login(member)

    for client in (Client(), member_client):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/?next=")

    response = member_client.post(LIST_URL, {"action": "recompute_targets", "_selected_action": [str(log.pk)]})
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


@pytest.mark.django_db
def test_logs_and_sessions_are_read_only(staff_client):
    log = ChatLogFactory.create()
    before = ChatLog.objects.values().get(pk=log.pk)

    assert staff_client.get(f"{LIST_URL}add/").status_code == 403
    assert staff_client.get(f"{LIST_URL}{log.pk}/delete/").status_code == 403
    assert (
        staff_client.post(change_url(log), {"user_message": "changed", "prompt_version": "legacy"}).status_code == 403
    )
    assert staff_client.get(f"/admin/chat/chatsession/{log.session_id}/delete/").status_code == 403
    staff_client.post(LIST_URL, {"action": "delete_selected", "_selected_action": [str(log.pk)], "post": "yes"})
    assert ChatLog.objects.values().get(pk=log.pk) == before

    page = staff_client.get(change_url(log)).content.decode()
    assert 'name="_save"' not in page


# -- the backfill action ----------------------------------------------------------------


def _legacy_row(**kwargs) -> ChatLog:
    """A row saved before targets existed, plus one citation whose target is malformed."""
    citations = [
        cite("silvia://your-portfolio"),
        cite("silvia://market-data/finnhub/aapl"),
        cite("silvia://your-account/checking"),
        cite("silvia://analysis", {"kind": "account"}),  # malformed: never touched
    ]
    return log_with(citations, **kwargs)


@pytest.mark.django_db
def _list_counts(client: Client, log: ChatLog) -> tuple[int, int, int, int]:
    """The four count columns of `log` on the changelist (searched by its id)."""
    [row] = client.get(LIST_URL, {"q": str(log.pk)}).context["cl"].result_list
    return (row.citation_total, row.typed_total, row.untyped_total, row.malformed_total)


@pytest.mark.django_db
def test_recompute_action_types_citations_reports_the_count_and_the_list_counts_follow(staff_client):
    old = _legacy_row()
    current = ChatLogFactory.create()  # already typed: nothing to do
    assert _list_counts(staff_client, old) == (4, 0, 3, 1)

    response = staff_client.post(
        LIST_URL, {"action": "recompute_targets", "_selected_action": [str(old.pk), str(current.pk)]}, follow=True
    )

    assert response.status_code == 200
    assert [str(m) for m in response.context["messages"]] == [
        "Typed 4 citation(s) (summary and inline) in 1 of 2 selected log(s)."
    ]
    old.refresh_from_db()
    assert [c.get("target") for c in old.citations] == [
        {"kind": "portfolio"},
        {"kind": "market_data", "ticker": "AAPL"},
        None,
        {"kind": "account"},
    ]
    assert [c.get("target") for c in old.inline_citations] == [c.get("target") for c in old.citations]
    assert old.citations[1]["source"] == "silvia://market-data/finnhub/aapl"  # other keys unchanged
    assert _list_counts(staff_client, old) == (4, 2, 1, 1)
    # The kind filter sees the new targets at once.
    assert listed(staff_client.get(LIST_URL, {"target_kind": "market_data"})) == {old.pk}

    again = staff_client.post(LIST_URL, {"action": "recompute_targets", "_selected_action": [str(old.pk)]}, follow=True)
    assert [str(m) for m in again.context["messages"]] == [
        "No citation could be typed from its source in the 1 selected log(s)."
    ]


@pytest.mark.django_db
def test_view_only_staff_can_look_but_not_recompute(viewer_client):
    old = _legacy_row()
    before = ChatLog.objects.values().get(pk=old.pk)

    listing = viewer_client.get(LIST_URL)
    assert listed(listing) == {old.pk}
    assert "recompute_targets" not in listing.content.decode()
    assert viewer_client.get(change_url(old)).status_code == 200

    viewer_client.post(LIST_URL, {"action": "recompute_targets", "_selected_action": [str(old.pk)]})
    assert ChatLog.objects.values().get(pk=old.pk) == before


@pytest.mark.django_db
def test_recompute_is_idempotent_and_skips_rows_whose_columns_are_not_lists_of_objects(staff_client):
    old = _legacy_row()
    odd = log_with([cite("silvia://your-portfolio")], ["not an object"])  # typable, but the row is malformed
    nulls = ChatLogFactory.create()
    # Not lists of objects (a column that is no list at all is refused by the constraint).
    ChatLog.objects.filter(pk=nulls.pk).update(citations=[None], inline_citations=[["nested"]])
    before = {pk: ChatLog.objects.values().get(pk=pk) for pk in (odd.pk, nulls.pk)}

    first = backfill_rows(model=ChatLog, ids=[old.pk, odd.pk, nulls.pk, old.pk, "not-a-uuid"])
    second = backfill_rows(model=ChatLog, ids=[old.pk, odd.pk, nulls.pk])

    assert (first.rows_scanned, first.rows_changed, dict(first.typed)) == (3, 1, {"portfolio": 2, "market_data": 2})
    assert sorted(row.id for row in first.malformed) == sorted(str(pk) for pk in (odd.pk, nulls.pk))
    assert (second.rows_scanned, second.rows_changed, second.typed_total, len(second.malformed)) == (3, 0, 0, 2)
    assert {pk: ChatLog.objects.values().get(pk=pk) for pk in (odd.pk, nulls.pk)} == before

    garbage = staff_client.post(
        LIST_URL, {"action": "recompute_targets", "_selected_action": ["not-a-uuid"]}, follow=True
    )
    assert garbage.status_code == 200  # a forged selection is no 500

    response = staff_client.post(
        LIST_URL, {"action": "recompute_targets", "_selected_action": [str(odd.pk)]}, follow=True
    )
    assert [str(m) for m in response.context["messages"]] == [
        "No citation could be typed from its source in the 1 selected log(s). "
        "1 log(s) skipped: a JSON column is not a list of objects."
    ]
