"""The support desk: this project's agent and its tools.

`awaken-s3 dev` serves this app (pyproject.toml names it), the tests run it
(tests/test_agent.py) and the three Lambda functions load it (handlers/). Replace the tools
with your own: each is a typed function, its input schema taken from the type hints and the
docstring; a parameter typed ToolContext receives the call's context.
"""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import Field

from awaken_s3 import Agent, App, ToolContext, ToolError, tool

#: stands in for your order system
ORDERS = {
    "A-17": {"status": "shipped", "carrier": "DHL", "arrives": "tomorrow"},
    "B-42": {"status": "packing", "carrier": None, "arrives": "in three days"},
}


@tool(idempotent=True)  # only reads: safe to run again when a crash left its outcome unknown
def lookup_order(order_id: Annotated[str, Field(examples=["A-17"])]) -> dict[str, object]:
    """Find an order by its id.

    Args:
        order_id: The order's id, as the customer wrote it (for example A-17).
    """
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise ToolError(f"there is no order {order_id}")  # the model reads this
    return {"order_id": order_id, **order}


@tool  # not idempotent: a call whose outcome a crash left unknown is never run again
def open_ticket(
    summary: Annotated[str, Field(examples=["Order A-17 is late"])], ctx: ToolContext
) -> str:
    """Open a support ticket, for a person to follow up.

    Args:
        summary: One line saying what the customer needs.
    """
    # Your ticketing system goes here. Its settings come from the environment (on Lambda: the
    # template's ToolEnvironment parameter); send ctx.idempotency_key with the request, it is
    # the same on every attempt of this call.
    queue = os.environ.get("TICKETS_QUEUE", "support")
    ctx.logger.info("opening a ticket", extra={"queue": queue})
    return f"ticket {ctx.idempotency_key[-8:]} opened in {queue}: {summary}"


app = App(
    [
        Agent(
            "support",
            description="Answers customers about their orders; opens a ticket for a person.",
            system=(
                "You are the support desk of an online shop. Look an order up before you "
                "answer about it, and open a ticket when the customer needs a person."
            ),
            tools=[lookup_order, open_ticket],
            max_turns=8,
        )
    ]
)
