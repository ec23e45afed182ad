"""Provider-neutral conversation messages.

Providers map these to and from their own wire formats; threads store them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class TextBlock(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(BaseModel):
    """A complete tool call: its input is always a parsed JSON object."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


class ThinkingBlock(BaseModel):
    """Model reasoning: Anthropic's ``thinking`` block, Bedrock's ``reasoningText``.

    ``signature`` is the provider's proof that it wrote ``thinking``; with extended
    thinking on, the request after a tool call must carry the block unchanged. A block
    without a signature (an OpenAI-compatible server's ``reasoning_content``) is kept for
    the record but never sent back: no API accepts unsigned reasoning.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = ""

    @property
    def signed(self) -> bool:
        return bool(self.signature)


class RedactedThinkingBlock(BaseModel):
    """Reasoning the provider encrypted (Anthropic ``redacted_thinking``, Bedrock
    ``redactedContent``): opaque ``data``, sent back unchanged. Bedrock's bytes are
    held base64-encoded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class ProviderBlock(BaseModel):
    """A block only its provider understands, kept verbatim: Anthropic's server tools
    (``server_tool_use``, ``web_search_tool_result`` ...). Sent back to that provider
    exactly as received, and to no other."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["provider_block"] = "provider_block"
    provider: str
    block: dict[str, Any]


#: blocks of a turn that are neither its text nor its tool calls, kept in stream order
KeptBlock = Annotated[
    ThinkingBlock | RedactedThinkingBlock | ProviderBlock, Field(discriminator="type")
]

#: every kind of block a message holds; the adapters match on it to build their wire blocks
AnyBlock = (
    TextBlock
    | ToolUseBlock
    | ToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ProviderBlock
)

ContentBlock = Annotated[AnyBlock, Field(discriminator="type")]


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["user", "assistant"]
    content: tuple[ContentBlock, ...]

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=(TextBlock(text=text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls(role="assistant", content=(TextBlock(text=text),))

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))
