"""The dev console in a real browser: headless Chromium (Debian's package) driven by
Playwright, clicked through as a person would, including killing the worker mid-answer and
watching the run resume and complete.

Set AWAKEN_CONSOLE_SCREENSHOT=docs/console.png to refresh the README's screenshot.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from awaken_s3.demo.model import ANSWER
from tests.dev.conftest import DevServer
from tests.dev.wire_thread import (
    BEFORE_KILL,
    WHOLE_TURN,
    openai_wire,
    push_interrupted_turn,
    start_dev_on,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: what the console shows for a fact it does not have (an en dash)
NONE = "\u2013"
#: only a hung test waits this long (milliseconds, Playwright's unit)
HUNG_MS = 90_000

if not CHROMIUM.exists():
    message = "needs Debian's chromium: apt-get install -y chromium"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)

from playwright.sync_api import BrowserContext, Page, expect, sync_playwright  # noqa: E402

expect.set_options(timeout=HUNG_MS)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[BrowserContext]:
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),  # a fresh user-data-dir per test
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport={"width": 1280, "height": 900},
        )
        context.set_default_timeout(HUNG_MS)
        try:
            yield context
        finally:
            context.close()


def open_console(browser: BrowserContext, server: DevServer) -> Page:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server.url + "/")
    expect(page.get_by_test_id("info")).to_contain_text("identity dev-user")
    assert not errors, errors
    return page


@pytest.mark.minutes
def test_start_a_run_kill_its_worker_and_watch_it_resume(
    dev_server_factory: Callable[..., DevServer], browser: BrowserContext
) -> None:
    server = dev_server_factory("--scripted-delay", "0.06", "--lease-seconds", "4")
    page = open_console(browser, server)

    page.get_by_role("button", name="Start a run").click()
    expect(page.get_by_test_id("run-status")).to_have_text(re.compile("queued|running"))
    partial = page.get_by_test_id("partial-text")
    expect(partial).to_have_text(re.compile(r"^A stream checkpoint is a hint.{60,}", re.S))
    # The text comes through the WebSocket API, frame by frame (polling is the fallback).
    expect(page.get_by_test_id("live-source")).to_have_text("socket")
    expect(page.get_by_test_id("checkpoint-epoch")).to_have_text("1")
    expect(page.get_by_test_id("checkpoint-writer")).to_contain_text("[$LATEST]")

    kill = page.get_by_role("button", name="Kill the worker")
    expect(kill).to_be_enabled()
    kill.click()
    expect(page.get_by_test_id("kill-result")).to_contain_text("killed pid")

    # A new worker takes over once the lease runs out, and says how it resumed.
    resumed = page.locator('[data-testid="resumes"] li[data-plan="R1"]')
    expect(resumed).to_contain_text("resumed with R1 from the")
    expect(page.get_by_test_id("checkpoint-epoch")).to_have_text("2")
    expect(partial.locator(".seam")).to_have_text("resumed: R1")
    if os.environ.get("AWAKEN_CONSOLE_SCREENSHOT"):
        expect(partial).to_have_text(re.compile(".{420,}", re.S))  # some text past the seam
        page.screenshot(path=os.environ["AWAKEN_CONSOLE_SCREENSHOT"], full_page=False)

    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    invocations = page.get_by_test_id("invocations")
    expect(invocations).to_contain_text("killed")
    expect(invocations).to_contain_text("ok")
    assistant = page.locator('[data-testid="messages"] li[data-role="assistant"]')
    expect(assistant).to_have_count(1)
    expect(assistant.locator(".block-text")).to_have_text(ANSWER)
    # What was streamed on screen is the committed turn, seam marker aside: the socket
    # carried it through the kill (the resumed worker's pushes), never the poll.
    assert partial.inner_text().replace("resumed: R1", "") == ANSWER
    expect(page.get_by_test_id("live-source")).to_have_text("socket")
    frames = page.get_by_test_id("live-frames")
    assert int(frames.inner_text()) > 30
    assert frames.get_attribute("data-chars") == str(len(ANSWER))  # every character, once
    expect(page.get_by_test_id("checkpoint-version")).to_have_text("deleted after the commit")

    # The thread list shows the run, completed.
    expect(page.get_by_test_id("threads")).to_contain_text("completed")


def test_a_run_with_a_tool_shows_the_call_and_its_claim(
    dev_server_factory: Callable[..., DevServer], browser: BrowserContext
) -> None:
    server = dev_server_factory("--scripted-delay", "0.02", "--sweep-interval", "0")
    page = open_console(browser, server)
    # The app's agents, from the API: the researcher has a tool, offered unless unticked.
    page.get_by_test_id("agent").select_option("researcher")
    expect(page.get_by_test_id("tool-lookup")).to_be_checked()
    page.get_by_role("button", name="Start a run").click()

    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    calls = page.get_by_test_id("tool-calls")
    expect(calls).to_contain_text("lookup")
    expect(calls).to_contain_text("finished by epoch 1, 1 attempt(s)")
    messages = page.get_by_test_id("messages")
    expect(messages.locator("li")).to_have_count(4)  # user, tool call, tool result, answer
    expect(messages).to_contain_text("[calls lookup")
    assistant = messages.locator('li[data-role="assistant"]').last
    expect(assistant).to_contain_text("lookup said: S3 conditional writes")
    expect(assistant).to_contain_text(ANSWER[:40])


def test_a_run_that_fails_before_any_output_shows_its_own_state_only(
    dev_server_factory: Callable[..., DevServer], browser: BrowserContext
) -> None:
    """The first run's worker is killed and the turn resumed with R1; the second run, on the
    same thread, fails before any output because the provider went away. The page then
    shows the second run's error and nothing of the first: no text, writer, epoch or plan."""
    with openai_wire() as wire:
        push_interrupted_turn(wire)
        server = start_dev_on(dev_server_factory, wire)
        page = open_console(browser, server)
        page.get_by_role("button", name="Start a run").click()
        partial = page.get_by_test_id("partial-text")
        expect(partial).to_have_text(BEFORE_KILL)
        page.get_by_role("button", name="Kill the worker").click()
        expect(page.get_by_test_id("kill-result")).to_contain_text("killed pid")
        expect(page.get_by_test_id("resumed-with")).to_have_text("R1")
        expect(page.get_by_test_id("checkpoint-epoch")).to_have_text("2")
        writer = page.get_by_test_id("checkpoint-writer")
        expect(writer).to_contain_text("[$LATEST]")
        first_writers = [
            item.inner_text() for item in page.locator('[data-testid="resumes"] li').all()
        ]
        first_writer = writer.inner_text()
        wire.proceed()
        expect(page.get_by_test_id("run-status")).to_have_text("completed")
        expect(page.get_by_test_id("turn-title")).to_contain_text("it extends every partial")
        assert partial.inner_text().replace("resumed: R1", "") == WHOLE_TURN
        first_run = page.get_by_test_id("run-id").inner_text()

        wire.stop()  # the provider goes away: nothing can connect to it now
        page.get_by_role("button", name="Start a run").click()  # on the same thread
        expect(page.get_by_test_id("run-id")).not_to_have_text(first_run)
        expect(page.get_by_test_id("run-status")).to_have_text("failed")

    expect(page.get_by_test_id("run-error-code")).to_have_text("provider_unreachable")
    expect(page.get_by_test_id("run-error-message")).to_have_text(
        "the service could not connect to the model provider"
    )
    expect(page.get_by_test_id("run-error")).to_be_visible()
    expect(page.get_by_test_id("turn-title")).to_have_text("No turn committed by this run")
    expect(partial).to_have_text("")
    # Its own checkpoint facts, if the console saw one while it retried (epoch 1, each retry
    # restarting the request: R4); never the first run's (epoch 2, resumed with R1).
    expect(writer).not_to_have_text(first_writer)
    expect(page.get_by_test_id("checkpoint-epoch")).to_have_text(re.compile(f"^({NONE}|1)$"))
    expect(page.get_by_test_id("resumed-with")).to_have_text(
        re.compile(f"^({NONE}|not resumed|R4)$")
    )
    expect(page.locator('[data-testid="resumes"] li[data-plan="R1"]')).to_have_count(0)
    for entry in first_writers:
        expect(page.get_by_test_id("resumes")).not_to_contain_text(entry)
