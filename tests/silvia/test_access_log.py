"""The access log can be turned off (issue 21, item 4; docs/deploying.md#logging).

Real uvicorn processes on the production settings: by default a request
line is logged; uvicorn's `--no-access-log` and `DJANGO_ACCESS_LOG=false`
each leave none (the logging config used to give uvicorn's access logger
its handler back). Django's own warnings (`Not Found: ...`) are not the
access log and stay.
"""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from tests.uvicorn_server import uvicorn_server

LINE = '"GET /… HTTP/1.1" 404'  # a path the routes do not know is masked (it could hold an account id)


@pytest.mark.parametrize(
    ("env", "args", "logged"),
    [
        ({}, (), True),
        ({}, ("--no-access-log",), False),
        ({"DJANGO_ACCESS_LOG": "false"}, (), False),
        ({"DJANGO_ACCESS_LOG": "true"}, (), True),
    ],
    ids=["default", "--no-access-log", "DJANGO_ACCESS_LOG=false", "DJANGO_ACCESS_LOG=true"],
)
def test_the_access_log_is_on_by_default_and_can_be_turned_off(tmp_path, env, args, logged):
    database = {"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    with uvicorn_server(tmp_path / "server.log", {**database, **env}, args) as server:
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(f"{server.url}/no-such-page", timeout=10)
        assert answer.value.code == 404
    output = server.output()
    assert "Not Found: /…" in output  # Django's warning: the server did log, and was read
    assert (LINE in output) is logged
