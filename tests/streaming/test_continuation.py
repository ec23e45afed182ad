"""Continuation requests (rules 3 and 8) and the seam check."""

from __future__ import annotations

import pytest

from awaken_s3.messages import Message
from awaken_s3.streaming.continuation import (
    CONTINUE_INSTRUCTION,
    MIN_SEAM_OVERLAP,
    MIN_SEAM_WORDS_OVERLAP,
    build_continuation_request,
    join_at_seam,
)

from .conftest import HISTORY, REQUEST


def test_prefill_sends_the_prefix_as_a_trailing_assistant_message() -> None:
    request = build_continuation_request(REQUEST, "The answer is ", prefill=True)
    assert list(request.messages) == [*HISTORY, Message.assistant("The answer is")]
    assert request.model == REQUEST.model
    assert list(REQUEST.messages) == list(HISTORY)  # the committed history is untouched


def test_without_prefill_a_user_message_asks_to_continue() -> None:
    request = build_continuation_request(REQUEST, "The answer is", prefill=False)
    assert list(request.messages) == [
        *HISTORY,
        Message.assistant("The answer is"),
        Message.user(CONTINUE_INSTRUCTION),
    ]


def test_no_prefix_means_the_original_request() -> None:
    assert build_continuation_request(REQUEST, "  \n", prefill=False) is REQUEST


def test_an_echoed_sentence_is_trimmed_without_prefill() -> None:
    prefix = "Oslo is the capital. It has 700k people."
    continuation = "It has 700k people. It lies on a fjord."
    assert (
        join_at_seam(prefix, continuation, trim_echo=True)
        == "Oslo is the capital. It has 700k people. It lies on a fjord."
    )


def test_a_cut_off_word_that_is_emitted_again_whole_is_joined() -> None:
    assert join_at_seam("we need internationali", "internationalization", trim_echo=True) == (
        "we need internationalization"
    )


def test_with_prefill_no_text_is_trimmed() -> None:
    prefix = "Oslo is the capital. It has 700k people."
    continuation = "It has 700k people."
    assert join_at_seam(prefix, continuation, trim_echo=False) == prefix + continuation


@pytest.mark.parametrize(
    ("prefix", "continuation"),
    [
        ("I like it", " it is fine"),  # shorter than the minimum overlap
        ("I know that", "that is true"),  # one short repeated word is legitimate
        ("the ratio is 1", "1 to 2"),
        ("we need reinternationali", "internationalization"),  # starts mid-word
        ("x=compute(a", "compute(a)"),  # not at a word boundary in the prefix
    ],
)
def test_ordinary_text_is_not_eaten(prefix: str, continuation: str) -> None:
    assert join_at_seam(prefix, continuation, trim_echo=True) == prefix + continuation


def test_the_minimum_overlaps_are_the_thresholds() -> None:
    word = "a" * (MIN_SEAM_OVERLAP - 1)  # one word, one character short
    assert join_at_seam(f"say {word}", f"{word} more", trim_echo=True) == f"say {word}{word} more"
    word = "a" * MIN_SEAM_OVERLAP
    assert join_at_seam(f"say {word}", f"{word} more", trim_echo=True) == f"say {word} more"
    # Two words need fewer characters: "It lies" is a typical echo.
    assert join_at_seam("Oslo. It lies", "It lies north", trim_echo=True) == "Oslo. It lies north"
    assert len("a b c") == MIN_SEAM_WORDS_OVERLAP
    assert join_at_seam("x a b c", "a b c d", trim_echo=True) == "x a b c d"
    assert join_at_seam("x a b", "a b c", trim_echo=True) == "x a ba b c"


def test_the_whitespace_the_prefix_ended_with_is_not_doubled() -> None:
    assert join_at_seam("Hello ", " world", trim_echo=False) == "Hello world"
    assert join_at_seam("Para one.\n\n", "\n\nPara two", trim_echo=False) == (
        "Para one.\n\nPara two"
    )


def test_indentation_after_a_newline_survives() -> None:
    assert join_at_seam("def f():\n", "    return 1", trim_echo=True) == "def f():\n    return 1"
