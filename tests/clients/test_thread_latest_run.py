"""``GET /threads/{id}`` names the thread's latest run: a page that holds only the chat's
thread id (the TypeScript client's ``reconnectToStream`` after a refresh) finds the run to
follow from there."""

from __future__ import annotations

import pytest

from tests.service.conftest import Aws, aws  # noqa: F401 (the fixture)
from tests.service.test_api import call, new_thread

pytestmark = pytest.mark.slow


def test_a_thread_names_its_latest_run(aws: Aws) -> None:  # noqa: F811
    thread_id = new_thread()
    _, thread = call("GET", f"/threads/{thread_id}")
    assert thread["latest_run"] is None
    call("POST", f"/threads/{thread_id}/runs", body={"message": "one", "run_id": "run-1"})
    _, thread = call("GET", f"/threads/{thread_id}")
    assert thread["latest_run"] == "run-1"  # the caller's id, never the stored one
    call("POST", "/runs/run-1/cancel")
    call("POST", f"/threads/{thread_id}/runs", body={"message": "two", "run_id": "run-2"})
    _, thread = call("GET", f"/threads/{thread_id}")
    assert thread["latest_run"] == "run-2"
    _, run = call("GET", "/runs/run-2")
    assert run["status"] == "queued"
