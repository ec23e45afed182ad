"""``awaken-s3 runs watch RUN_ID``: follow a run in the terminal, from the HTTP API.

It polls ``GET /runs/{id}/partial`` as any client should (``If-None-Match`` with the last
``ETag``, ``after=`` the text it has, ``turn=``), shows the partial text growing and the run's
state, and ends with the committed turn from ``GET /threads/{id}``. On a terminal that is
rich's live display; to a pipe or a file (a live display writes nothing there until it
stops) it is one plain line per thing that happened, flushed at once: a status change, new
text (a JSON string, so one line holds it whatever it contains), a tool call that appeared
or completed, a resume and its plan, and the end. It works against ``awaken-s3 dev`` or a
deployed API (``AWAKEN_API_URL``, and the bearer token in ``AWAKEN_API_TOKEN``). The HTTP
calls use the standard library: a few GETs need no client library. :class:`RunWatch` folds
the answers and says what changed; it is pure.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

from awaken_s3.errors import AwakenError

TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
#: said at the end of a run that committed no model turn of its own
NO_TURN: Final = "no turn committed by this run"


class WatchError(AwakenError):
    """The API could not be followed; the message says why."""


@dataclass
class RunWatch:
    """What the watcher knows of a run, folded from the partial view's answers."""

    run_id: str
    status: str = "?"
    turn: int = 0
    message_count: int = 0
    #: the turn the text belongs to, and its text so far
    text_turn: int | None = None
    text: str = ""
    resumed_with: str | None = None
    version: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    etag: str | None = None
    #: texts the API replaced (R4 after whitespace only), kept to say so
    replaced: int = 0
    #: the run's public error (``{"code", "message"}``) once it failed
    error: dict[str, str] | None = None

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL

    def query(self) -> dict[str, str]:
        if self.text_turn is None:
            return {}
        return {"turn": str(self.text_turn), "after": str(len(self.text))}

    def apply(self, view: dict[str, Any]) -> list[str]:
        """Fold one answer in; the lines that say what it changed."""
        lines: list[str] = []
        progress = (str(view["status"]), int(view["turn"]), int(view["message_count"]))
        if progress != (self.status, self.turn, self.message_count):
            self.status, self.turn, self.message_count = progress
            lines.append(
                f"status: {self.status} (turn {self.turn}, {self.message_count} messages committed)"
            )
        error = view.get("error")
        if error and error != self.error:
            lines.append(f"error: {error.get('code')}: {error.get('message')}")
        self.error = error or None
        partial = view.get("partial")
        if partial is None:
            return lines
        if partial["turn"] != self.text_turn:
            self.text_turn, self.text = int(partial["turn"]), ""
        offset = int(partial["offset"])
        new_text = str(partial["text"])
        if offset != len(self.text):
            self.replaced += 1
            lines.append(f"text replaced from offset {offset}: {_quoted(new_text)}")
        elif new_text:
            lines.append(f"text: {_quoted(new_text)}")
        self.text = self.text[:offset] + new_text
        resumed_with = partial.get("resumed_with")
        if resumed_with and resumed_with != self.resumed_with:
            lines.append(f"resumed with {resumed_with} (turn {self.text_turn})")
        self.resumed_with = resumed_with
        self.version = partial.get("version")
        seen = {call.get("id"): bool(call.get("complete")) for call in self.tool_calls}
        self.tool_calls = list(partial.get("tool_calls") or [])
        for call in self.tool_calls:
            complete = bool(call.get("complete"))
            if seen.get(call.get("id")) != complete:
                state = f"complete {call.get('arguments', '')}" if complete else "streaming"
                lines.append(f"tool call {call.get('id')} {call.get('name')}: {state}")
        return lines


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


class Api:
    """GETs against the HTTP API with the caller's bearer token."""

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 30.0) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise WatchError(f"the API URL must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def get(
        self, path: str, *, query: dict[str, str] | None = None, etag: str | None = None
    ) -> tuple[int, dict[str, str], Any]:
        url = self.base_url + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        request = urllib.request.Request(url, method="GET")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        if etag:
            request.add_header("If-None-Match", etag)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return answer.status, dict(answer.headers.items()), json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 304:
                return 304, dict(exc.headers.items()), None
            try:
                body = json.loads(exc.read())
            except ValueError:
                body = {}
            return exc.code, dict(exc.headers.items()), body
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise WatchError(f"cannot reach the API at {self.base_url}: {reason}") from exc


def _refusal(status: int, body: Any, what: str) -> WatchError:
    if status in (401, 403):
        return WatchError(f"the API refused the request ({status}): set AWAKEN_API_TOKEN")
    message = body.get("message") if isinstance(body, dict) else None
    return WatchError(f"{what}: HTTP {status}" + (f": {message}" if message else ""))


def poll(api: Api, watch: RunWatch) -> list[str] | None:
    """One conditional GET: None when nothing changed, else the lines saying what did."""
    status, headers, body = api.get(
        f"/runs/{urllib.parse.quote(watch.run_id)}/partial", query=watch.query(), etag=watch.etag
    )
    if status == 304:
        return None
    if status != 200:
        raise _refusal(status, body, f"run {watch.run_id}")
    watch.etag = headers.get("ETag") or headers.get("etag")
    return watch.apply(body)


def committed_turn(api: Api, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run as it ended, and the thread's messages."""
    status, _, run = api.get(f"/runs/{urllib.parse.quote(run_id)}")
    if status != 200:
        raise _refusal(status, run, f"run {run_id}")
    status, _, thread = api.get(f"/threads/{urllib.parse.quote(str(run['thread_id']))}")
    if status != 200:
        raise _refusal(status, thread, f"thread {run['thread_id']}")
    return run, list(thread["messages"])


def render(watch: RunWatch) -> Any:
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="dim")
    facts.add_column()
    style = {"completed": "green", "failed": "red", "cancelled": "red"}.get(watch.status, "cyan")
    facts.add_row("run", watch.run_id)
    facts.add_row("status", Text(watch.status, style=f"bold {style}"))
    facts.add_row("turn", f"{watch.turn} ({watch.message_count} messages committed)")
    if watch.version:
        facts.add_row("checkpoint", f"version {watch.version}")
    facts.add_row("resumed with", watch.resumed_with or "-")
    if watch.error:
        error = f"{watch.error.get('code')}: {watch.error.get('message')}"
        facts.add_row("error", Text(error, style="bold red"))
    for call in watch.tool_calls:
        state = "complete" if call.get("complete") else "streaming"
        facts.add_row("tool call", f"{call.get('name')} ({state}): {call.get('arguments', '')}")
    title = f"partial turn {watch.text_turn}" if watch.text_turn is not None else "partial turn"
    body = Text(watch.text) if watch.text else Text("(nothing streamed yet)", style="dim")
    return Group(facts, Panel(body, title=title, title_align="left"))


def watch_run(
    api: Api,
    run_id: str,
    *,
    interval: float = 0.5,
    out: TextIO = sys.stdout,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Follow ``run_id`` until it ends; 0 when it completed, 1 otherwise."""
    watch = RunWatch(run_id)
    if out.isatty():
        return _watch_live(api, watch, interval=interval, out=out, sleep=sleep)
    return _watch_lines(api, watch, interval=interval, out=out, sleep=sleep)


def _watch_lines(
    api: Api, watch: RunWatch, *, interval: float, out: TextIO, sleep: Callable[[float], None]
) -> int:
    def say(line: str) -> None:
        print(line, file=out, flush=True)

    for line in poll(api, watch) or ():
        say(line)
    while not watch.ended:
        sleep(interval)
        for line in poll(api, watch) or ():
            say(line)
    text, last, completed = ending(api, watch.run_id)
    say(NO_TURN if text is None else f"committed turn: {_quoted(text)}")
    say(last)
    return 0 if completed else 1


def committed_text(run: dict[str, Any], messages: list[dict[str, Any]]) -> str | None:
    """The text of the last model turn ``run`` committed; None when it committed none.

    The run view's ``turn`` counts the model turns the run committed and its
    ``message_count`` is the thread's length as the run last advanced it: a run that
    committed nothing has no turn of its own, and the thread's last assistant message is an
    earlier run's (or, past ``message_count``, a later one's).
    """
    if int(run["turn"]) < 1:
        return None
    mine = [m for m in messages[: int(run["message_count"])] if m["role"] == "assistant"]
    if not mine:
        return None
    return "".join(b.get("text", "") for b in mine[-1]["content"] if b["type"] == "text")


def ending(api: Api, run_id: str) -> tuple[str | None, str, bool]:
    """This run's committed turn's text (None: none), the last line, and whether it completed."""
    run, messages = committed_turn(api, run_id)
    text = committed_text(run, messages)
    error = run.get("error")
    if run["status"] != "completed":
        reason = f": {error['code']}: {error['message']}" if error else ""
        return text, f"run {run_id} {run['status']}{reason}", False
    return text, f"run {run_id} completed after {run['turn']} turn(s)", True


def _watch_live(
    api: Api, watch: RunWatch, *, interval: float, out: TextIO, sleep: Callable[[float], None]
) -> int:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console(file=out)
    poll(api, watch)
    with Live(render(watch), console=console, refresh_per_second=8) as live:
        while not watch.ended:
            sleep(interval)
            if poll(api, watch) is not None:
                live.update(render(watch))
    text, last, completed = ending(api, watch.run_id)
    if text is None:
        console.print(Text(NO_TURN, style="dim"))
    else:
        console.rule("committed turn")
        console.print(Text(text))
    console.print(Text(last, style="green" if completed else "bold red"))
    return 0 if completed else 1
