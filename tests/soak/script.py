"""What each soak run's model says, derived from the run's seed alone (pure).

Every worker process, in any container, asked for turn ``t`` of run ``r`` streams the same
whole turn, so the committed thread of a run can be checked byte for byte against
:func:`expected_messages`, whatever was killed, raced or planted on the way.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any, Final

from awaken_s3.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock

#: tools the soak registers: ``add`` has a side effect that must run at most once,
#: ``lookup`` is idempotent and may run again after a crash between claim and result
ADD: Final = "add"
LOOKUP: Final = "lookup"
SEPARATORS: Final = (" ", " ", " ", ", ", ".\n\n", "\n", " - ")
_PROMPT = re.compile(r"^soak run (?P<seed>\d+) form=(?P<form>prefill|continue)$")


@dataclass(frozen=True)
class ToolCallSpec:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class TurnSpec:
    text: str
    calls: tuple[ToolCallSpec, ...] = ()

    @property
    def stop_reason(self) -> str:
        return "tool_use" if self.calls else "end_turn"


@dataclass(frozen=True)
class RunScript:
    seed: int
    prefill: bool
    turns: tuple[TurnSpec, ...]

    @property
    def prompt(self) -> str:
        return prompt_for(self.seed, self.prefill)


def prompt_for(seed: int, prefill: bool) -> str:
    return f"soak run {seed} form={'prefill' if prefill else 'continue'}"


def parse_prompt(prompt: str) -> tuple[int, bool]:
    match = _PROMPT.match(prompt)
    if match is None:
        raise ValueError(f"not a soak prompt: {prompt!r}")
    return int(match["seed"]), match["form"] == "prefill"


def _text(rng: random.Random, words: int, turn: int) -> str:
    # Distinct words: a repeated ending would let the documented echo trim eat a legitimate
    # repeat (strictly periodic text), which is not what the soak is about.
    parts = []
    for i in range(words):
        parts.append(f"t{turn}w{i}{rng.choice('abcdefgh')}{rng.choice('xyz') * rng.randint(0, 5)}")
        parts.append(rng.choice(SEPARATORS))
    return "".join(parts).rstrip() + "."


def script_for(seed: int, prefill: bool) -> RunScript:
    rng = random.Random(seed)
    count = rng.randint(2, 4)
    turns = []
    for turn in range(count):
        text = _text(rng, rng.randint(120, 400), turn)
        if turn == count - 1:
            turns.append(TurnSpec(text))
            continue
        calls = []
        for n in range(rng.randint(1, 3)):  # parallel tool calls
            name = rng.choice((ADD, LOOKUP))
            # Each call's arguments are unique in the whole soak: the checker counts a tool's
            # effects by its arguments (a tool never sees its call id), and two runs drawing
            # the same key once made one run's lookup count as another's dropped call.
            unique = (seed * 10 + turn) * 10 + n
            call_input: dict[str, Any] = (
                {"a": unique * 1000 + rng.randint(0, 999), "b": rng.randint(0, 999)}
                if name == ADD
                else {"key": f"k{unique}-{rng.randint(0, 99)}-{'v' * rng.randint(0, 40)}"}
            )
            calls.append(ToolCallSpec(f"s{seed}-t{turn}-c{n}", name, call_input))
        turns.append(TurnSpec(text, tuple(calls)))
    return RunScript(seed, prefill, tuple(turns))


def tool_result(call: ToolCallSpec) -> str:
    if call.name == ADD:
        return str(call.input["a"] + call.input["b"])
    return f"value of {call.input['key']}"


def assistant_message(spec: TurnSpec) -> Message:
    blocks: list[TextBlock | ToolUseBlock] = [TextBlock(text=spec.text)]
    blocks += [ToolUseBlock(id=c.id, name=c.name, input=c.input) for c in spec.calls]
    return Message(role="assistant", content=tuple(blocks))


def expected_messages(script: RunScript) -> list[Message]:
    messages = [Message.user(script.prompt)]
    for spec in script.turns:
        messages.append(assistant_message(spec))
        if spec.calls:
            results = tuple(
                ToolResultBlock(tool_use_id=c.id, content=tool_result(c)) for c in spec.calls
            )
            messages.append(Message(role="user", content=results))
    return messages


def arguments_json(call: ToolCallSpec) -> str:
    return json.dumps(call.input)
