"""Request validation of the fake Anthropic and Bedrock servers, as the real APIs do it.

Always (:func:`anthropic_content_rules`, :func:`bedrock_content_rules`, and the thinking
rules too):

* Every message's content must be non-empty, except an optional final assistant message
  (Anthropic; Bedrock allows no exception), and no text block may be blank. The error text
  is the API's.

With extended thinking on:

* Every thinking block must carry the signature the server issued for its text
  (:func:`tests.providers.wire.anthropic_wire.sign`): reasoning goes back unchanged.
* An assistant message that holds reasoning must start with it.
* The assistant turn the tool loop continues (the one before the last user message,
  when that message carries tool results) and a trailing assistant message (a
  prefill) must start with a thinking block. The error text is the API's.

Consecutive messages of one role are merged first, as the Messages API does.
"""

from __future__ import annotations

import base64
from typing import Any, Final

from tests.providers.wire import anthropic_wire as aw
from tests.providers.wire import bedrock_wire as bw
from tests.providers.wire.anthropic_wire import sign
from tests.providers.wire.server import Received, Scripted

_FINAL_ASSISTANT: Final = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "
    "We recommend you include thinking blocks from previous turns. To avoid this "
    "requirement, disable `thinking`."
)
_FIRST_BLOCK: Final = (
    "messages.{i}.content.0: If an assistant message contains any thinking blocks, "
    "the first block must be thinking or redacted_thinking. Found {found}."
)
_BAD_SIGNATURE: Final = "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
_ANTHROPIC_EMPTY: Final = (
    "messages.{i}: all messages must have non-empty content except for the optional final "
    "assistant message"
)
_ANTHROPIC_BLANK: Final = "messages: text content blocks must contain non-whitespace text"
_BEDROCK_EMPTY: Final = (
    "The content field in the Message object at messages.{i} is empty. Add a ContentBlock "
    "object to the content field and try again."
)
_BEDROCK_BLANK: Final = (
    "The text field in the ContentBlock object at messages.{i}.content.{j} is blank. Add "
    "text to the text field, and try again."
)

#: a block reduced to (kind, thinking text, signature): kind is "thinking", "redacted",
#: "tool_use", "tool_result", "text" or another provider block type
_Block = tuple[str, str, str]


def _enabled(config: Any) -> bool:
    return isinstance(config, dict) and config.get("type") not in (None, "disabled")


def _merged(messages: list[tuple[str, list[_Block]]]) -> list[tuple[str, list[_Block]]]:
    out: list[tuple[str, list[_Block]]] = []
    for role, blocks in messages:
        if out and out[-1][0] == role:
            out[-1][1].extend(blocks)
        else:
            out.append((role, list(blocks)))
    return out


def check(messages: list[tuple[str, list[_Block]]]) -> str | None:
    """The API's error message for a request with thinking on, or None when valid."""
    messages = _merged(messages)
    reasoning = ("thinking", "redacted")
    for i, (role, blocks) in enumerate(messages):
        if role != "assistant" or not blocks:
            continue
        kinds = [b[0] for b in blocks]
        if any(k in reasoning for k in kinds) and kinds[0] not in reasoning:
            return _FIRST_BLOCK.format(i=i, found=kinds[0])
        for j, (kind, text, signature) in enumerate(blocks):
            if kind == "thinking" and signature != sign(text):
                return _BAD_SIGNATURE.format(i=i, j=j)
    if not messages:
        return None
    must_start: int | None = None
    if messages[-1][0] == "assistant":
        must_start = len(messages) - 1
    elif len(messages) >= 2 and any(b[0] == "tool_result" for b in messages[-1][1]):
        must_start = len(messages) - 2
    if must_start is not None:
        blocks = messages[must_start][1]
        found = blocks[0][0] if blocks else "nothing"
        if found not in reasoning:
            return _FINAL_ASSISTANT.format(i=must_start, found=found)
    return None


def _anthropic_block(block: dict[str, Any]) -> _Block:
    kind = block["type"]
    if kind == "thinking":
        return ("thinking", block["thinking"], block["signature"])
    if kind == "redacted_thinking":
        return ("redacted", "", "")
    return (kind, "", "")


def _anthropic_content_error(messages: list[dict[str, Any]]) -> str | None:
    for i, message in enumerate(messages):
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        final_assistant = i == len(messages) - 1 and message["role"] == "assistant"
        if not content and not final_assistant:
            return _ANTHROPIC_EMPTY.format(i=i)
        if any(b["type"] == "text" and not b["text"].strip() for b in content):
            return _ANTHROPIC_BLANK
    return None


def anthropic_content_rules(received: Received) -> Scripted | None:
    error = _anthropic_content_error(received.json()["messages"])
    return None if error is None else aw.error_response(400, "invalid_request_error", error)


def _bedrock_content_error(messages: list[dict[str, Any]]) -> str | None:
    for i, message in enumerate(messages):
        if not message["content"]:
            return _BEDROCK_EMPTY.format(i=i)
        for j, block in enumerate(message["content"]):
            if "text" in block and not block["text"].strip():
                return _BEDROCK_BLANK.format(i=i, j=j)
    return None


def bedrock_content_rules(received: Received) -> Scripted | None:
    error = _bedrock_content_error(received.json()["messages"])
    return None if error is None else bw.error_response(400, "ValidationException", error)


def anthropic_thinking_rules(received: Received) -> Scripted | None:
    body = received.json()
    refused = anthropic_content_rules(received)
    if refused is not None or not _enabled(body.get("thinking")):
        return refused
    messages = [
        (m["role"], [_anthropic_block(b) for b in m["content"]])
        if isinstance(m["content"], list)
        else (m["role"], [("text", "", "")])
        for m in body["messages"]
    ]
    error = check(messages)
    return None if error is None else aw.error_response(400, "invalid_request_error", error)


def _bedrock_block(block: dict[str, Any]) -> _Block:
    if "reasoningContent" in block:
        content = block["reasoningContent"]
        if "reasoningText" in content:
            text = content["reasoningText"]
            return ("thinking", text["text"], text.get("signature", ""))
        base64.b64decode(content["redactedContent"], validate=True)
        return ("redacted", "", "")
    if "toolUse" in block:
        return ("tool_use", "", "")
    if "toolResult" in block:
        return ("tool_result", "", "")
    return ("text", "", "")


def bedrock_thinking_rules(received: Received) -> Scripted | None:
    body = received.json()
    fields = body.get("additionalModelRequestFields") or {}
    refused = bedrock_content_rules(received)
    if refused is not None or not _enabled(fields.get("thinking")):
        return refused
    messages = [(m["role"], [_bedrock_block(b) for b in m["content"]]) for m in body["messages"]]
    error = check(messages)
    return None if error is None else bw.error_response(400, "ValidationException", error)
