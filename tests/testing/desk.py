"""An app as a user writes it, for the plugin's own tests (tests/testing/conftest.py names it)."""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import Field

from awaken_s3 import Agent, App, ToolContext, ToolError, tool

ORDERS = {"A-17": {"status": "shipped"}}


@tool(idempotent=True)
def lookup_order(order_id: Annotated[str, Field(examples=["A-17"])]) -> dict[str, object]:
    """Find an order by its id."""
    if order_id not in ORDERS:
        raise ToolError(f"there is no order {order_id}")
    return {"order_id": order_id, **ORDERS[order_id]}


@tool
async def open_ticket(
    summary: Annotated[str, Field(examples=["late order"])], ctx: ToolContext
) -> str:
    """Open a ticket (async, not idempotent)."""
    return f"ticket in {os.environ.get('TICKETS_QUEUE', 'none')}: {summary}"


app = App([Agent("support", tools=[lookup_order, open_ticket])])
