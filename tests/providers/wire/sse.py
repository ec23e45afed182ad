"""Server-sent-event framing as the Anthropic and OpenAI APIs send it."""

from __future__ import annotations

import json
from typing import Any


def sse(data: Any, *, event: str | None = None) -> bytes:
    lines = []
    if event is not None:
        lines.append(f"event: {event}")
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    lines.append(f"data: {text}")
    return ("\n".join(lines) + "\n\n").encode()


SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
