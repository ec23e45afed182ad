"""Prefill capability defaults per model id, and per-instance overrides."""

from __future__ import annotations

import pytest

from awaken_s3.providers.prefill import claude_generation, default_claude_prefill, resolve_prefill


@pytest.mark.parametrize(
    ("model", "generation", "prefill"),
    [
        ("claude-3-5-sonnet-20240620", (3, 5), True),
        ("claude-3-7-sonnet-latest", (3, 7), True),
        ("claude-3-haiku-20240307", (3, 0), True),
        ("anthropic.claude-3-5-sonnet-20241022-v2:0", (3, 5), True),
        ("claude-sonnet-4-20250514", (4, 0), True),
        ("claude-opus-4-1", (4, 1), True),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", (4, 5), True),
        ("claude-haiku-4-5", (4, 5), True),
        ("claude-opus-4-6", (4, 6), False),
        ("claude-sonnet-4-6", (4, 6), False),
        ("global.anthropic.claude-opus-4-6-v1:0", (4, 6), False),
        ("claude-opus-4-7", (4, 7), False),
        ("claude-sonnet-5", (5, 0), False),
        (
            "arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude-opus-4-6-v1:0",
            (4, 6),
            False,
        ),
        ("claude-2.1", (2, 1), True),
        ("claude-instant-v1", (1, 0), True),
        ("amazon.nova-pro-v1:0", None, False),
        ("meta.llama3-70b-instruct-v1:0", None, False),
    ],
)
def test_claude_generation_and_default(
    model: str, generation: tuple[int, int] | None, prefill: bool
) -> None:
    assert claude_generation(model) == generation
    assert default_claude_prefill(model) is prefill


def test_overrides() -> None:
    never = lambda m: False  # noqa: E731
    assert resolve_prefill("x", True, never) is True
    assert resolve_prefill("x", None, never) is False
    assert resolve_prefill("a", {"a": True}, never) is True
    assert resolve_prefill("b", {"a": True}, never) is False
    assert resolve_prefill("a", lambda m: None, lambda m: True) is True
    assert resolve_prefill("a", lambda m: False, lambda m: True) is False
