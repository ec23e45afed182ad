"""The support agent on the local stack, offline.

The `awaken` fixture comes with awaken-s3 (its pytest plugin, awaken_s3.testing): this
project's app runs on moto through the real HTTP API and worker handlers, the worker in local
containers fed by an SQS event source, as on Lambda, with a scripted model that calls the
agent's tools. A test may kill the worker at a chosen point; the run then resumes in a new
container once its lease runs out, and the test checks what the caller would see.
"""

from awaken_s3.testing import KillPoint


def test_the_agent_looks_the_order_up_and_answers_with_it(awaken):
    run = awaken.run("Where is my order A-17?")
    assert run.status == "completed"
    assert run.tool_result("lookup_order").json()["status"] == "shipped"
    assert '"status": "shipped"' in run.answer


def test_an_unknown_order_is_reported_to_the_model(awaken):
    awaken.script(calls=[("lookup_order", {"order_id": "Z-99"})])
    run = awaken.run("Where is my order Z-99?")
    result = run.tool_result("lookup_order")
    assert result.is_error and "there is no order Z-99" in result.content


def test_a_worker_killed_mid_answer_resumes_and_commits_the_answer_once(awaken):
    awaken.kill_at(KillPoint.text(40, turn=2))
    run = awaken.run("Where is my order A-17?")
    assert run.status == "completed"
    assert run.invocations[0] == "killed" and run.plans == ["R1"]
    [kill] = run.kills
    # The whole answer, from the text saved before the kill on, committed once.
    assert len(kill.partial_text) == 40 and run.answer.startswith(kill.partial_text)
    assert run.answer.count("That is everything the tools told me.") == 1
    assert len([m for m in run.messages if m["role"] == "assistant"]) == 2


def test_a_ticket_opened_just_before_a_crash_is_never_opened_twice(awaken):
    awaken.kill_at(KillPoint.tool("open_ticket", when="after"))
    run = awaken.run("Order B-42 is late and I need someone to call me.")
    assert run.status == "completed"
    [opened] = awaken.tool_runs("open_ticket")
    assert opened.finished and opened.attempt == 1
    # The model is told the outcome is unknown instead of a second ticket being opened.
    assert run.tool_result("open_ticket").is_error


def test_a_lookup_cut_short_by_a_crash_runs_again_with_the_same_idempotency_key(awaken):
    awaken.kill_at(KillPoint.tool("lookup_order", when="after"))
    run = awaken.run("Where is my order A-17?")
    assert run.status == "completed"
    first, second = awaken.tool_runs("lookup_order")
    assert (first.attempt, second.attempt) == (1, 2)
    assert first.idempotency_key == second.idempotency_key
    assert run.tool_result("lookup_order").json()["status"] == "shipped"
