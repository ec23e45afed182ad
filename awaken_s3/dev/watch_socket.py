"""``awaken-s3 runs watch`` through the WebSocket API (``AWAKEN_SOCKET_URL``, or ``--socket``).

It follows the run with ``{"action": "follow", ...}`` and prints one line per thing that
happened, as the polling watcher does into a pipe: new text (a JSON string), a resume and
its plan, a complete tool call, a committed turn, the end. Text is assembled by offset
(:class:`awaken_s3.service.frames.FollowedText`): a connection that drops is opened again
with the turn and offset the watcher has, and what was sent twice is printed once. The
committed turn is then read from the HTTP API, as the polling watcher ends. A socket that
cannot be opened at all leaves the watch to polling (:func:`follow`'s None).
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any, Final, TextIO

from awaken_s3.dev.watch import NO_TURN, Api, WatchError, _quoted, ending
from awaken_s3.service.frames import FollowedText

#: connections opened again after a drop, before the watcher gives up
MAX_RECONNECTS: Final = 5


def socket_address(url: str, token: str | None) -> str:
    if not url.startswith(("ws://", "wss://")):
        raise WatchError(f"the socket URL must start with ws:// or wss://, got {url!r}")
    if not token:
        return url
    return url + ("&" if "?" in url else "?") + urllib.parse.urlencode({"token": token})


def frame_lines(view: FollowedText, frame: dict[str, Any]) -> list[str]:
    """Fold ``frame`` into ``view``; the lines that say what it changed."""
    kind = frame.get("type")
    if kind == "error":
        raise WatchError(f"run {frame.get('run_id')}: {frame.get('code')}: {frame.get('message')}")
    done = {key for key, call in view.tool_calls.items() if call.complete}
    new = view.apply(frame)
    if kind == "text":
        return [f"text: {_quoted(new)}"] if new else []
    if kind == "resumed":
        return [f"resumed with {frame['plan']} (turn {frame['turn']})"]
    if kind == "tool_call":
        # A call is shown once, when its last piece came (a large input takes several).
        call = view.tool_calls.get((int(frame["turn"]), int(frame["index"])))
        if call is None or not call.complete or (call.turn, call.index) in done:
            return []
        arguments = json.dumps(call.input, ensure_ascii=False)
        return [f"tool call {call.id} {call.name}: complete {arguments}"]
    if kind == "skipped":
        return [f"part of turn {frame['turn']} was too large to send: read it once committed"]
    if kind == "turn_committed":
        return [f"turn {frame['turn']} committed ({frame['text_length']} characters)"]
    if kind == "run_ended":
        error = frame.get("error")
        reason = f": {error.get('code')}: {error.get('message')}" if error else ""
        return [f"status: {frame['status']}{reason}"]
    return []


def follow(api: Api, socket_url: str, run_id: str, *, out: TextIO) -> int | None:
    """Follow ``run_id`` until it ends; 0 when it completed, 1 otherwise; None when the
    socket could not be opened (the caller polls instead)."""
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
    from websockets.sync.client import connect

    view = FollowedText()
    address = socket_address(socket_url, api.token)
    reconnects = 0
    while view.status is None:
        message: dict[str, Any] = {"action": "follow", "run_id": run_id}
        if view.turn is not None:
            message.update(turn=view.turn, after=len(view.text))
        try:
            with connect(address, open_timeout=api.timeout) as socket:
                socket.send(json.dumps(message))
                for raw in socket:
                    for line in frame_lines(view, json.loads(raw)):
                        print(line, file=out, flush=True)
                    if view.status is not None:
                        break
        except (OSError, InvalidHandshake, InvalidURI) as exc:
            if view.turn is None and reconnects == 0:
                return None  # never connected: poll instead
            reconnects += 1
            if reconnects > MAX_RECONNECTS:
                raise WatchError(f"the socket at {socket_url} keeps failing: {exc}") from exc
        except ConnectionClosed:
            reconnects += 1
            if reconnects > MAX_RECONNECTS:
                raise WatchError(f"the socket at {socket_url} keeps closing") from None
    text, last, completed = ending(api, run_id)
    print(NO_TURN if text is None else f"committed turn: {_quoted(text)}", file=out, flush=True)
    print(last, file=out, flush=True)
    return 0 if completed else 1
