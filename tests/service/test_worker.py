"""The SQS worker handler, invoked in-process with SQS events against DynamoDB, S3 and SQS
on moto; a fake event source mapping deletes acknowledged messages and makes failed ones
visible again, as Lambda and the visibility timeout do."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from awaken_s3 import Agent, App, tool
from awaken_s3.demo.model import ANSWER, ContinuingModel
from awaken_s3.service import worker
from awaken_s3.service.queue import RunMessage, send_run_message
from awaken_s3.service.wiring import Services, shared_session, warm_runtime
from awaken_s3.service.worker import LambdaHandler, make_handler
from awaken_s3.streaming.events import StreamEvent, TextDelta
from awaken_s3.streaming.provider import ModelRequest, Provider, ProviderCapabilities
from awaken_s3.streaming.scripted import (
    Hook,
    ScriptedProvider,
    Stall,
    finish,
    text_deltas,
    text_turn,
    tool_call,
)
from awaken_s3.threads import RunState
from awaken_s3.threads.models import RunStatus
from handlers import api
from tests.fixtures.clock import FakeClock
from tests.service.conftest import (
    Aws,
    FakeContext,
    api_call,
    emf_metrics,
    http_event,
    record_from_message,
    sqs_event,
    sqs_record,
    stored,
)

pytestmark = pytest.mark.slow

#: seconds only a hung test waits
HUNG = 60.0


@pytest.fixture
def worker_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """The worker's monotonic clock (its deadline, and the runner's and the loop's checks of
    it), moved by the test alone: a deadline cut falls where the script puts it, on any
    machine. The Lambda handler takes no clock, so the worker module's one clock is patched."""
    clock = FakeClock()
    monkeypatch.setattr(worker, "monotonic", clock)
    return clock


def call_api(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    response = api.lambda_handler(http_event(method, path, **kwargs), FakeContext().lambda_context)
    assert int(response["statusCode"]) < 300, response
    body: dict[str, Any] = json.loads(response["body"])
    return body


def start_run(run_id: str = "run-1", **body: Any) -> str:
    thread = call_api("POST", "/threads")
    call_api(
        "POST",
        f"/threads/{thread['thread_id']}/runs",
        body={"message": "What is a stream checkpoint?", "run_id": run_id, **body},
    )
    return str(thread["thread_id"])


def fast_model() -> Provider:
    return ContinuingModel(chunk=40, delay=0.0)


def deliver(
    aws: Aws, handler: LambdaHandler, *, remaining_ms: int = 300_000
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Receive what the queue holds, invoke the worker with it, then settle the messages."""
    messages = aws.receive()
    assert messages, "the queue is empty"
    event = sqs_event(*(record_from_message(m, aws) for m in messages))
    response = handler(event, FakeContext(remaining_ms=remaining_ms).lambda_context)
    failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
    for message in messages:
        if message["MessageId"] in failed:
            aws.release(message)
        else:
            aws.delete(message)
    return response, messages


def assistant_texts(thread_id: str) -> list[str]:
    thread = call_api("GET", f"/threads/{thread_id}")
    return [
        "".join(block.get("text", "") for block in message["content"])
        for message in thread["messages"]
        if message["role"] == "assistant"
    ]


def test_api_to_queue_to_worker_commits_the_whole_turn(
    aws: Aws, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    thread_id = start_run()
    response, messages = deliver(aws, make_handler(provider_factory=fast_model))
    assert response == {"batchItemFailures": []}
    assert len(messages) == 1
    thread = call_api("GET", f"/threads/{thread_id}")
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant"]
    assert assistant_texts(thread_id) == [ANSWER]
    run = call_api("GET", "/runs/run-1")
    assert run["status"] == "completed"
    assert run["turn"] == 1
    assert run["usage"]["output_tokens"] > 0
    assert aws.receive() == []  # acknowledged, and no continuation
    metrics = emf_metrics(capsys.readouterr().out)
    assert metrics["RunsCompleted"] == 1
    assert metrics["TurnsCommitted"] == 1
    [ended] = [r for r in caplog.records if r.getMessage() == "run invocation ended"]
    assert (vars(ended)["run_id"], vars(ended)["end"]) == (stored("run-1"), "completed")
    # The answer itself is user data: it is never logged.
    assert not any(ANSWER[:60] in str(vars(r)) for r in caplog.records)


def test_duplicate_deliveries_converge_to_one_committed_turn(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    thread_id = start_run()
    [message] = aws.receive()
    handler = make_handler(provider_factory=fast_model)
    # A standard queue may hand one message out twice, even in one batch ...
    record = record_from_message(message, aws)
    standard = "arn:aws:sqs:us-east-1:123456789012:awaken-runs"
    twice = sqs_event(
        {**record, "eventSourceARN": standard}, {**record, "eventSourceARN": standard}
    )
    assert handler(twice, FakeContext().lambda_context) == {"batchItemFailures": []}
    # ... and again later, to another invocation.
    again = handler(sqs_event(record), FakeContext().lambda_context)
    assert again == {"batchItemFailures": []}
    assert assistant_texts(thread_id) == [ANSWER]
    metrics = emf_metrics(capsys.readouterr().out)
    assert metrics["RunsCompleted"] == 1
    assert metrics["RunsNotRunnable"] == 2
    assert metrics["TurnsCommitted"] == 1


def test_a_record_for_a_run_a_live_worker_holds_is_acknowledged(aws: Aws) -> None:
    thread_id = start_run()

    async def hold(services: Services) -> RunState:
        return await services.threads.claim_run(stored("run-1"), worker="other", lease_seconds=300)

    held = aws.run(hold)
    handler = make_handler(provider_factory=fast_model)
    response, _ = deliver(aws, handler)
    # The live holder drives the run (its own record comes back if it dies): a duplicate
    # record is not kept bouncing towards the dead-letter queue.
    assert response == {"batchItemFailures": []}

    async def current(services: Services) -> RunState:
        return await services.threads.get_run(stored("run-1"))

    # The holder's lease is untouched and nothing was committed.
    assert aws.run(current).lease == held.lease
    assert assistant_texts(thread_id) == []

    # The holder hands over as a worker does: release, then a continuation message.
    async def hand_over(services: Services) -> None:
        await services.threads.release_lease(
            stored("run-1"), worker="other", epoch=held.lease.epoch
        )
        await send_run_message(
            services.sqs,
            services.queue_url,
            RunMessage(run_id=stored("run-1"), reason="continue"),
            epoch=held.lease.epoch,
        )

    aws.run(hand_over)
    response, _ = deliver(aws, handler)
    assert response == {"batchItemFailures": []}
    assert assistant_texts(thread_id) == [ANSWER]


def test_a_record_for_a_run_whose_holder_stopped_renewing_is_kept_until_its_lease_ends(
    aws: Aws,
) -> None:
    thread_id = start_run()

    async def hold(services: Services) -> RunState:
        # A worker that died holding a short lease: it never renews or releases. Short
        # against the handler's 60 s (a third of it left means a holder that missed its
        # renewals), long enough that a loaded machine cannot let it run out before the
        # handler looks (moto's SQS keeps wall-clock time, so this test cannot fake it).
        return await services.threads.claim_run(stored("run-1"), worker="dead", lease_seconds=8)

    aws.run(hold)
    handler = make_handler(provider_factory=fast_model)
    [message] = aws.receive()  # received with a 30 s visibility timeout
    event = sqs_event(record_from_message(message, aws))
    response = handler(event, FakeContext().lambda_context)
    assert response == {"batchItemFailures": [{"itemIdentifier": message["MessageId"]}]}
    # Not at once (the holder's lease has not run out yet)...
    assert aws.receive() == []
    # ... but long before the 30 s the message was received with.
    redelivered = wait_for_message(aws, within=20.0)
    assert redelivered["MessageId"] == message["MessageId"]
    assert int(redelivered["Attributes"]["ApproximateReceiveCount"]) == 2
    event = sqs_event(record_from_message(redelivered, aws))
    assert handler(event, FakeContext().lambda_context) == {"batchItemFailures": []}
    aws.delete(redelivered)
    assert assistant_texts(thread_id) == [ANSWER]


def wait_for_message(aws: Aws, *, within: float) -> dict[str, Any]:
    """The next message the queue shows; ``within`` only bounds a hung test."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        messages = aws.receive()
        if messages:
            assert len(messages) == 1, messages
            return messages[0]
        time.sleep(0.25)
    raise AssertionError(f"no message came back within {within}s")


def test_the_worker_keeps_its_record_hidden_in_step_with_the_lease(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker that dies without answering must let its record come back a little after its
    # lease, not after the queue's visibility timeout: it sets the record's visibility to the
    # lease plus a margin at the claim and again with every renewal.
    monkeypatch.setenv("AWAKEN_LEASE_SECONDS", "3")
    monkeypatch.setenv("AWAKEN_VISIBILITY_MARGIN_SECONDS", "1.5")
    thread_id = start_run()
    seen: list[tuple[str, int]] = []

    def record(**kwargs: Any) -> None:
        params = kwargs["params"]
        seen.append((params["ReceiptHandle"], params["VisibilityTimeout"]))

    # The turn lasts until the worker has renewed its lease once (a second of its 3 s lease).
    model = RenewalWaiter(lambda: len(seen) >= 2)
    botocore_session = shared_session()._session
    botocore_session.register("before-parameter-build.sqs.ChangeMessageVisibility", record)
    warm_runtime().reset()  # clients opened from now on carry the hook
    try:
        response, [message] = deliver(aws, make_handler(provider_factory=lambda: model))
    finally:
        botocore_session.unregister("before-parameter-build.sqs.ChangeMessageVisibility", record)
    assert response == {"batchItemFailures": []}
    assert assistant_texts(thread_id) == [ANSWER]
    # One at the claim, one per renewal: always this record, always lease + margin (rounded up).
    assert len(seen) >= 2
    assert set(seen) == {(message["ReceiptHandle"], 5)}


class RenewalWaiter(ContinuingModel):
    """Streams the demo's answer, but its last part only once ``ready()`` holds (or after a
    bound only a hung test reaches, leaving the assertion on what was seen to fail)."""

    def __init__(self, ready: Callable[[], bool]) -> None:
        super().__init__(chunk=200, delay=0.0)
        self.ready = ready

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        events = [event async for event in super()._stream(request)]
        async with asyncio.timeout(HUNG):
            while not self.ready():  # noqa: ASYNC110 - a botocore hook is no awaitable
                await asyncio.sleep(0.05)
        for event in events:
            yield event


def test_malformed_messages_are_acknowledged_and_counted(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    bodies = ["not json", '{"run_id": "../../etc"}', "{}", '{"run_id": "r", "reason": "x"}']
    event = sqs_event(*(sqs_record(body, group_id=f"g{i}") for i, body in enumerate(bodies)))
    response = make_handler(provider_factory=fast_model)(event, FakeContext().lambda_context)
    assert response == {"batchItemFailures": []}
    assert emf_metrics(capsys.readouterr().out)["MalformedMessages"] == len(bodies)


def test_a_message_for_an_unknown_run_is_acknowledged(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    event = sqs_event(sqs_record('{"run_id": "ghost"}', group_id="ghost"))
    response = make_handler(provider_factory=fast_model)(event, FakeContext().lambda_context)
    assert response == {"batchItemFailures": []}
    assert emf_metrics(capsys.readouterr().out)["UnknownRuns"] == 1


class BrokenProvider:
    """A provider with a bug: not a provider error, an unexpected exception."""

    name = "broken"

    def capabilities(self, model: str) -> ProviderCapabilities:
        return ProviderCapabilities(assistant_prefill=False)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        raise RuntimeError("a bug in the provider adapter")


def test_fifo_partial_batch_response_fails_only_the_broken_runs_group(aws: Aws) -> None:
    """Run A hits an unexpected error: its record and the later record of its group fail
    (FIFO order within a run holds), while run B, another group, completes."""
    start_run("run-a")
    thread_b = start_run("run-b")
    broken = make_handler(provider_factory=_first_broken)
    run_a, run_b = stored("run-a"), stored("run-b")
    a1 = sqs_record(json.dumps({"run_id": run_a}), group_id=run_a)
    a2 = sqs_record(json.dumps({"run_id": run_a, "reason": "continue"}), group_id=run_a)
    b1 = sqs_record(json.dumps({"run_id": run_b}), group_id=run_b)
    response = broken(sqs_event(a1, b1, a2), FakeContext().lambda_context)
    assert response == {
        "batchItemFailures": [
            {"itemIdentifier": a1["messageId"]},
            {"itemIdentifier": a2["messageId"]},
        ]
    }
    assert assistant_texts(thread_b) == [ANSWER]
    # The failed invocation released its lease: the retry can run at once, and does.
    healthy = make_handler(provider_factory=fast_model)
    retry = healthy(sqs_event(a1, a2), FakeContext().lambda_context)
    assert retry == {"batchItemFailures": []}
    assert call_api("GET", "/runs/run-a")["status"] == "completed"


def test_standard_queue_batches_process_every_record(aws: Aws) -> None:
    start_run("run-a")
    standard = "arn:aws:sqs:us-east-1:123456789012:awaken-runs"
    bad = sqs_record(json.dumps({"run_id": stored("run-a")}), queue_arn=standard)
    good = sqs_record(json.dumps({"run_id": stored("run-b")}), queue_arn=standard)
    thread_b = start_run("run-b")
    handler = make_handler(provider_factory=lambda: _first_broken())
    response = handler(sqs_event(bad, good), FakeContext().lambda_context)
    assert response == {"batchItemFailures": [{"itemIdentifier": bad["messageId"]}]}
    assert assistant_texts(thread_b) == [ANSWER]


class _FirstCallBroken:
    """Breaks on its first stream only (one provider serves the whole invocation)."""

    name = "first-broken"

    def __init__(self) -> None:
        self.inner = fast_model()
        self.calls = 0

    def capabilities(self, model: str) -> ProviderCapabilities:
        return self.inner.capabilities(model)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("a bug in the provider adapter")
        return self.inner.stream(request)


def _first_broken() -> Provider:
    return _FirstCallBroken()


def test_an_app_s_agent_runs_its_own_tools_once_and_the_run_completes(aws: Aws) -> None:
    seen: list[dict[str, int]] = []

    @tool
    def add(a: int, b: int) -> str:
        """Add two integers."""
        seen.append({"a": a, "b": b})
        return str(a + b)

    app = App([Agent("plain"), Agent("calculator", tools=[add])])
    model = ScriptedProvider(
        [
            [*tool_call(0, "add", {"a": 2, "b": 3}, call_id="call-1"), *finish("tool_use")],
            text_turn("2 + 3 = 5"),
        ]
    )
    api_handler = app.api_handler()

    def app_api(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        return api_call(api_handler, method, path, **kwargs)

    thread_id = app_api("POST", "/threads")["thread_id"]
    app_api(
        "POST",
        f"/threads/{thread_id}/runs",
        body={"message": "2 + 3?", "run_id": "run-1", "agent": "calculator"},
    )
    handler = app.worker_handler(provider_factory=lambda: model)
    response, _ = deliver(aws, handler)
    assert response == {"batchItemFailures": []}
    assert seen == [{"a": 2, "b": 3}]
    # The model was offered the agent's tool, with the schema its type hints give.
    [offered] = model.requests[0].tools
    assert offered.name == "add" and offered.description == "Add two integers."
    assert offered.input_schema["properties"] == {
        "a": {"type": "integer"},
        "b": {"type": "integer"},
    }
    thread = call_api("GET", f"/threads/{thread_id}")
    roles = [m["role"] for m in thread["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert thread["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "call-1",
        "content": "5",
        "is_error": False,
    }
    assert assistant_texts(thread_id)[-1] == "2 + 3 = 5"
    assert call_api("GET", "/runs/run-1")["status"] == RunStatus.COMPLETED.value


def test_the_provider_lives_on_the_invocations_loop_and_is_closed(aws: Aws) -> None:
    events: list[str] = []

    class ClosableModel(ContinuingModel):
        async def aclose(self) -> None:
            events.append("closed")

    def factory() -> Provider:
        asyncio.get_running_loop()  # raises outside a running loop
        events.append("opened")
        return ClosableModel(chunk=40, delay=0.0)

    start_run()
    response, _ = deliver(aws, make_handler(provider_factory=factory))
    assert response == {"batchItemFailures": []}
    assert events == ["opened", "closed"]


def test_a_turn_cut_by_the_deadline_is_continued_from_its_checkpoint_and_committed_once(
    aws: Aws, capsys: pytest.CaptureFixture[str], worker_clock: FakeClock
) -> None:
    prefix, rest = "The checkpoint holds the partial turn", ", and the next worker goes on."
    cut = TextDelta(prefix[-5:])
    model = ScriptedProvider(
        [
            # The deadline passes while the first invocation streams, before its last delta:
            # the stream is cut after that delta, whatever the machine's speed.
            [*text_deltas(prefix[:-5]), Hook(lambda: worker_clock.advance(3600)), cut, Stall()],
            text_turn(rest),
        ]
    )
    handler = make_handler(provider_factory=lambda: model)
    thread_id = start_run()

    first, _ = deliver(aws, handler)
    assert first == {"batchItemFailures": []}
    first_metrics = emf_metrics(capsys.readouterr().out)
    assert (first_metrics["RunsSuspended"], first_metrics["ContinuationsSent"]) == (1, 1)
    assert first_metrics["CheckpointPuts"] >= 1
    assert call_api("GET", "/runs/run-1")["status"] == "suspended"
    assert assistant_texts(thread_id) == []
    # The suspended run's continuation is on the queue, in the run's message group.
    [continuation] = aws.receive()
    assert json.loads(continuation["Body"]) == {"run_id": stored("run-1"), "reason": "continue"}
    assert continuation["Attributes"]["MessageGroupId"] == stored("run-1")
    aws.release(continuation)

    second, _ = deliver(aws, handler)
    assert second == {"batchItemFailures": []}
    second_metrics = emf_metrics(capsys.readouterr().out)
    assert (second_metrics["RecoveryPlanR1"], second_metrics["RunsCompleted"]) == (1, 1)
    # The model was asked to continue from the saved text ...
    assert model.requests[1].messages[-1].role == "assistant"
    assert model.requests[1].messages[-1].text == prefix
    # ... and the thread holds the whole turn, once.
    assert assistant_texts(thread_id) == [prefix + rest]
    assert call_api("GET", "/runs/run-1")["status"] == "completed"
    assert aws.receive() == []

    async def leftover(services: Services) -> object:
        return await services.checkpoints.get(stored("run-1"))

    assert aws.run(leftover) is None  # deleted after the commit
