"""The runs both checkpoint clean-up suites judge checkpoints against (memory and DynamoDB)."""

from __future__ import annotations

from awaken_s3.messages import Message
from awaken_s3.threads import RunSettings, RunStatus
from awaken_s3.threads.base import RunStore
from tests.fixtures.runs import OWNER, seed_run

THREAD = "thread-1"
SETTINGS = RunSettings(model="m")


async def seed_ended_and_live(threads: RunStore) -> None:
    """Run ``done`` completed and run ``live`` queued, on one thread (one live run per thread:
    the ended one comes first)."""
    await seed_run(threads, "done", thread_id=THREAD, settings=SETTINGS)
    claimed = await threads.claim_run("done", worker="w", lease_seconds=60)
    await threads.finish_run(
        "done", worker="w", epoch=claimed.lease.epoch, status=RunStatus.COMPLETED
    )
    await threads.create_run(
        "live", thread_id=THREAD, owner=OWNER, settings=SETTINGS, messages=[Message.user("hi")]
    )
