"""How a turn's partial goes out again: as a prefill, or in a continue message.

A :class:`PrefixForm` belongs to one :class:`~awaken_s3.streaming.turn_machine.TurnMachine`
and holds the form its next request takes. With ``prefill`` the partial is the assistant
message the model continues verbatim; without, a user message asks the model to continue and
the accumulator trims the echo it tends to repeat (see :mod:`.continuation`). The form starts
as the adapter's capability and only ever falls back to the continue message:

* carried reasoning means thinking is on, and the APIs refuse a prefill then;
* a provider that rejects a prefill it claimed to support gets one immediate retry in the
  continue-message form (a different request, not a retry: it costs no budget).
"""

from __future__ import annotations

from dataclasses import dataclass

from awaken_s3.messages import KeptBlock
from awaken_s3.streaming.accumulator import StreamAccumulator
from awaken_s3.streaming.continuation import build_continuation_request
from awaken_s3.streaming.errors import PrefillRejected
from awaken_s3.streaming.provider import ModelRequest
from awaken_s3.streaming.reasoning import carries_reasoning
from awaken_s3.streaming.recovery import has_reusable_text


@dataclass
class PrefixForm:
    #: the next request sends its prefix as a prefill
    prefill: bool
    #: the one fallback after a rejected prefill was taken
    fallback_used: bool = False
    #: whether the request of the attempt in flight sent a prefix
    sent_prefix: bool = False

    def request(self, base: ModelRequest, acc: StreamAccumulator) -> ModelRequest:
        """The next attempt's request: ``base``, continuing from ``acc``'s reusable text."""
        prefix = acc.text
        self.sent_prefix = has_reusable_text(prefix)
        if not self.sent_prefix:
            return base
        return build_continuation_request(
            base, prefix, prefill=self.prefill, blocks=acc.reusable_blocks
        )

    def restart(
        self, acc: StreamAccumulator, prefix_text: str, blocks: tuple[KeptBlock, ...]
    ) -> None:
        """Restart ``acc`` from a plan's prefix; carried reasoning means thinking is on, and
        the APIs refuse a prefill then, so the prefix goes out with a continue message."""
        if carries_reasoning(blocks):
            self.prefill = False
        acc.restart(prefix_text, trim_echo=not self.prefill, blocks=blocks)

    def fall_back(self, error: BaseException, acc: StreamAccumulator) -> bool:
        """Whether ``error`` is a rejected prefill that gets its one retry in the
        continue-message form; if so, ``acc`` is restarted for it."""
        if not (
            isinstance(error, PrefillRejected)
            and self.prefill
            and self.sent_prefix
            and not self.fallback_used
        ):
            return False
        self.fallback_used = True
        self.prefill = False
        acc.restart(acc.text, trim_echo=True, blocks=acc.reusable_blocks)
        return True
