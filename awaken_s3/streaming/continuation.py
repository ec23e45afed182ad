"""Continuation requests and the seam between a saved prefix and its continuation.

Both are pure. The messages built here are request-only: the runner never puts
them in the returned turn: a committed turn is the whole turn, never a
continuation-only message.

Seam policy:

* The prefix goes out without trailing whitespace: providers that accept a
  prefill reject an assistant message ending in whitespace, and a model asked to
  continue re-emits the whitespace it needs. When the continuation then starts
  with exactly the whitespace the prefix ended with, that copy is dropped.
* Without prefill the model is asked, in a new user message, to continue; models
  often repeat the last words or sentence first. The longest overlap where the
  prefix *ends* with what the continuation *starts* with is trimmed when it
  starts at a word boundary of the prefix and is either at least
  :data:`MIN_SEAM_OVERLAP` (8) characters long or at least
  :data:`MIN_SEAM_WORDS_OVERLAP` (5) characters spanning two or more words.
  Natural text almost never starts a sentence part with the exact words the
  previous part ended with, while one short repeated word is legitimate ("I know
  that" + "that is true") and is kept. Strictly periodic text ("ha ha ha ha")
  can lose a repetition; the seam is not promised byte-for-byte.
* With prefill the model continues its own message verbatim, so no text overlap
  is trimmed (only the whitespace rule applies).
* A seam is *decided* once no further continuation text can change how it joins
  (:func:`seam_undecided`). Until then the continuation is held back: a cut while
  it is undecided (a continuation still echoing the prefix, or leading whitespace
  that may still match the prefix's) drops it instead of appending it, so a half
  echo never becomes part of the prefix, a checkpoint or a commit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Final

from awaken_s3.messages import KeptBlock, Message, TextBlock
from awaken_s3.streaming.provider import ModelRequest

MIN_SEAM_OVERLAP: Final = 8
MIN_SEAM_WORDS_OVERLAP: Final = 5
#: the longest echo looked for, and how much continuation text settles the seam
SEAM_WINDOW: Final = 1024

CONTINUE_INSTRUCTION: Final = (
    "Your previous reply was cut off mid-stream. Continue it exactly where it stopped: "
    "start with the very next characters, do not repeat any of the text above, "
    "and add no preamble or commentary."
)


def build_continuation_request(
    request: ModelRequest,
    prefix_text: str,
    *,
    prefill: bool,
    blocks: Sequence[KeptBlock] = (),
) -> ModelRequest:
    """The request that continues ``prefix_text``; ``request`` holds the committed history.

    ``blocks`` (reusable reasoning and server blocks of the partial turn) go in front of
    the prefix text, unchanged.
    """
    prefix = prefix_text.rstrip()
    if not prefix:
        return request
    content = (*blocks, TextBlock(text=prefix))
    messages = [*request.messages, Message(role="assistant", content=content)]
    if not prefill:
        messages.append(Message.user(CONTINUE_INSTRUCTION))
    return dataclasses.replace(request, messages=tuple(messages))


def continued_prefix(messages: Sequence[Message]) -> Message | None:
    """The assistant prefix a continuation request (either form) asks the model to continue,
    or None when ``messages`` do not end like one."""
    if not messages:
        return None
    last = messages[-1]
    if last.role == "assistant":
        return last
    before = messages[-2] if len(messages) >= 2 else None
    if before is not None and before.role == "assistant" and last.text == CONTINUE_INSTRUCTION:
        return before
    return None


def _trailing_whitespace(text: str) -> str:
    return text[len(text.rstrip()) :]


def seam_overlap(prefix: str, continuation: str, *, trim_echo: bool) -> int:
    """How many leading characters of ``continuation`` repeat the end of ``prefix``."""
    tail_ws = _trailing_whitespace(prefix)
    if tail_ws and continuation.startswith(tail_ws):
        return len(tail_ws)
    if not trim_echo:
        return 0
    longest = min(len(prefix), len(continuation), SEAM_WINDOW)
    for k in range(longest, MIN_SEAM_WORDS_OVERLAP - 1, -1):
        start = len(prefix) - k
        if start > 0 and not prefix[start - 1].isspace():
            continue
        candidate = continuation[:k]
        if prefix.endswith(candidate) and _trimmable(candidate):
            return k
    return 0


def _trimmable(overlap: str) -> bool:
    words = len(overlap.split())
    return len(overlap) >= MIN_SEAM_WORDS_OVERLAP and (
        words >= 2 or (words == 1 and len(overlap) >= MIN_SEAM_OVERLAP)
    )


def seam_undecided(prefix: str, continuation: str, *, trim_echo: bool) -> bool:
    """True while more continuation text could still change how ``continuation`` joins
    ``prefix`` (:func:`seam_overlap` of a longer continuation could differ).

    That is the case when ``continuation`` is a proper beginning of the whitespace the prefix
    ends with, or, when echoes are trimmed, a proper beginning of an ending of the prefix
    (starting at a word boundary) that would be trimmed once complete. Once decided, the
    overlap is final: a longer overlap would need ``continuation`` to be a proper beginning of
    a longer ending, which it is not.
    """
    if not continuation:
        return False
    tail_ws = _trailing_whitespace(prefix)
    if tail_ws:
        if continuation.startswith(tail_ws):
            return False
        if tail_ws.startswith(continuation):
            return True
    if not trim_echo or len(continuation) >= SEAM_WINDOW:
        return False
    for start in range(max(0, len(prefix) - SEAM_WINDOW), len(prefix) - len(continuation)):
        if start > 0 and not prefix[start - 1].isspace():
            continue
        if prefix.startswith(continuation, start) and _trimmable(prefix[start:]):
            return True
    return False


def join_at_seam(prefix: str, continuation: str, *, trim_echo: bool) -> str:
    return prefix + continuation[seam_overlap(prefix, continuation, trim_echo=trim_echo) :]
