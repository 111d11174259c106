"""What the no-user-data-in-logs tests share (docs/privacy.md): the user data to look for (the examples'
account ids and texts, the demo accounts' ids) and the scans for it, a live-turn step whose tool input is not
JSON, and maya's pages data."""

from __future__ import annotations

import json
import re

from django.contrib.auth.models import User

from devtools.recorded_model import message_events
from tests.live_support import tool_use
from tests.uvicorn_server import ROOT

EXAMPLES = ROOT / "examples" / "turns"
_ID_KEYS = (
    "source_account_id",
    "snaptrade_account_id",
    "manual_account_uuid",
    "account_uuid",
    "account_id",
    "accountId",
)


def example_account_ids() -> set[str]:
    """Every account id in examples/turns (the id columns of docs/accounts.md and `accountId` of targets)."""
    ids: set[str] = set()
    for path in EXAMPLES.glob("*.json"):
        keys = "|".join(_ID_KEYS)
        ids |= set(re.findall(rf'"(?:{keys})":\s*"([^"]+)"', path.read_text(encoding="utf-8")))
    return ids


def _walk(value: object):
    """Every (key, value) pair of a JSON document, at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def example_user_texts() -> set[str]:
    """The users' questions and session titles in examples/turns."""
    texts: set[str] = set()
    for path in EXAMPLES.glob("*.json"):
        for key, value in _walk(json.loads(path.read_text(encoding="utf-8"))):
            if key == "user_message" or (key == "session" and isinstance(value, dict)):
                texts.add(value if key == "user_message" else value.get("title"))
    return {text for text in texts if isinstance(text, str) and text}


def demo_account_ids() -> set[str]:
    """The ids of maya's and sam's demo accounts (finance/demo_data.py)."""
    from finance.demo_data import MAYA, SAM

    return {account[key] for *_, accounts in MAYA + SAM for account in accounts for key in _ID_KEYS if key in account}


def assert_no_account_id(output: str) -> None:
    """Fail naming the first account id found in `output`, and where."""
    for account_id in sorted(example_account_ids() | demo_account_ids()):
        at = output.find(account_id)
        assert at < 0, f"account id {account_id} logged: …{output[max(0, at - 200) : at + 80]}…"
    assert '"accountId"' not in output  # nor a target's JSON


def assert_no_user_data(output: str) -> None:
    """No account id, target JSON, question or session title in `output`."""
    assert_no_account_id(output)
    for user_text in sorted(example_user_texts()):
        at = output.find(user_text)
        assert at < 0, f"user text {user_text!r} logged: …{output[max(0, at - 200) : at + 80]}…"


#: A tool_use whose input is not JSON, quoting an account id and SQL. The SDK's own accumulator
#: raised a ValueError quoting the whole input (issue 20); the runner now answers an `is_error` result.
BAD_TOOL_INPUT = ['{"query": "SELECT * FROM account_details ', "WHERE source_account_id = '{account}'\",, }"]


def bad_tool_input_step(account_id: str) -> dict:
    """A recorded-model step streaming a `tool_use` whose input is not JSON and quotes `account_id`."""
    events = message_events({"content": [tool_use("toolu_bad", "execute_sql", {})], "stop_reason": "tool_use"})
    pieces = [piece.replace("{account}", account_id) for piece in BAD_TOOL_INPUT]
    out = []
    for name, data in events:
        if data.get("delta", {}).get("type") == "input_json_delta":
            for piece in pieces:
                out.append(
                    {"event": name, "data": {**data, "delta": {"type": "input_json_delta", "partial_json": piece}}}
                )
            pieces = []
        else:
            out.append({"event": name, "data": data})
    return {"events": out}


def seed_pages_data(maya: User) -> None:
    """maya's password (to sign in to the pages) and the demo accounts the account pages show."""
    from finance.demo import seed_demo_finance

    maya.set_password("maya-password-1")
    maya.save()
    seed_demo_finance(maya=maya, sam=User.objects.get_or_create(username="sam")[0])


def maya_account_paths(maya: User) -> list[str]:
    from citations.urls import account_path
    from finance.models import Account
    from finance.selectors import account_target_id

    ids = [account_target_id(account) for account in Account.objects.filter(user=maya)]
    return [account_path(account_id) for account_id in ids if account_id]
