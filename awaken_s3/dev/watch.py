"""``awaken-s3 runs watch RUN_ID``: follow a run in the terminal, from the HTTP API.

It polls ``GET /runs/{id}/partial`` as any client should (``If-None-Match`` with the last
``ETag``, ``after=`` the text it has, ``turn=``), shows the partial text growing and the run's
state with rich's live display, and ends with the committed turn from ``GET /threads/{id}``.
It works against ``awaken-s3 dev`` or a deployed API (``AWAKEN_API_URL``, and the bearer
token in ``AWAKEN_API_TOKEN``). The HTTP calls use the standard library: a few GETs need no
client library. :class:`RunWatch` folds the answers and is pure.
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

TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})


class WatchError(Exception):
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

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL

    def query(self) -> dict[str, str]:
        if self.text_turn is None:
            return {}
        return {"turn": str(self.text_turn), "after": str(len(self.text))}

    def apply(self, view: dict[str, Any]) -> None:
        self.status = str(view["status"])
        self.turn = int(view["turn"])
        self.message_count = int(view["message_count"])
        partial = view.get("partial")
        if partial is None:
            return
        if partial["turn"] != self.text_turn:
            self.text_turn, self.text = int(partial["turn"]), ""
        offset = int(partial["offset"])
        if offset != len(self.text):
            self.replaced += 1
        self.text = self.text[:offset] + str(partial["text"])
        self.resumed_with = partial.get("resumed_with")
        self.version = partial.get("version")
        self.tool_calls = list(partial.get("tool_calls") or [])


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


def poll(api: Api, watch: RunWatch) -> bool:
    """One conditional GET; whether anything changed."""
    status, headers, body = api.get(
        f"/runs/{urllib.parse.quote(watch.run_id)}/partial", query=watch.query(), etag=watch.etag
    )
    if status == 304:
        return False
    if status != 200:
        raise _refusal(status, body, f"run {watch.run_id}")
    watch.etag = headers.get("ETag") or headers.get("etag")
    watch.apply(body)
    return True


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
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console(file=out)
    watch = RunWatch(run_id)
    poll(api, watch)
    with Live(render(watch), console=console, refresh_per_second=8) as live:
        while not watch.ended:
            sleep(interval)
            if poll(api, watch):
                live.update(render(watch))
    run, messages = committed_turn(api, run_id)
    assistant = [m for m in messages if m["role"] == "assistant"]
    if assistant:
        text = "".join(b.get("text", "") for b in assistant[-1]["content"] if b["type"] == "text")
        console.rule("committed turn")
        console.print(Text(text))
    error = run.get("error")
    if run["status"] != "completed":
        reason = f": {error['code']}: {error['message']}" if error else ""
        console.print(Text(f"run {run_id} {run['status']}{reason}", style="bold red"))
        return 1
    console.print(Text(f"run {run_id} completed after {run['turn']} turn(s)", style="green"))
    return 0
