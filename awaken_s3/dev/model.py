"""The dev stack's app and its scripted model.

The scripted model is :class:`awaken_s3.testing.model.ToolCallingModel`, the one a project's
tests use: it calls the tools a turn offers (arguments built from their schemas) and answers
quoting their results, continuing from any prefix a resume sends. The dev stack streams it at a
pace a person can watch and closes its answers with the demo's paragraph; a kill by hand
reaches every recovery plan: R1 (during text), R2 (after the complete calls), R3 (inside a
call's arguments), R4 (before any text), with the user's own tools.

:func:`dev_app` is the app ``awaken-s3 dev`` serves when it is given none: a ``writer`` with no
tools and a ``researcher`` with a ``lookup`` tool.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from awaken_s3.agents import Agent, App
from awaken_s3.demo.model import ANSWER
from awaken_s3.runtime.tools import tool
from awaken_s3.testing.model import ToolCallingModel

TOOL_NAME = "lookup"
LOOKUP_TOPIC = "S3 conditional writes: If-None-Match and If-Match on PutObject"
LOOKUP_RESULT = (
    "PutObject with If-None-Match: * creates an object only if none exists; with If-Match: "
    "<etag> it replaces the object only while its ETag is still that one. Either answers 412 "
    "Precondition Failed otherwise, so a writer holding an old ETag cannot overwrite a newer one."
)


@tool(idempotent=True)
def lookup(topic: Annotated[str, Field(examples=[LOOKUP_TOPIC])]) -> str:
    """Look up a topic in the awaken-s3 notes.

    Args:
        topic: What to look up.
    """
    return f"{topic}: {LOOKUP_RESULT}"


def dev_app() -> App:
    return App(
        [
            Agent(
                "writer",
                description="Answers in one paragraph, with no tools.",
                overridable={"system", "max_turns"},
            ),
            Agent(
                "researcher",
                description="Looks the topic up first (the lookup tool), then answers.",
                tools=[lookup],
                overridable={"tools", "system", "max_turns"},
            ),
        ]
    )


def dev_model(*, chunk: int = 4, delay: float = 0.08) -> ToolCallingModel:
    """The dev stack's scripted model: ``chunk`` characters every ``delay`` seconds."""
    return ToolCallingModel(chunk=chunk, delay=delay, name="dev-scripted", closing=ANSWER)
