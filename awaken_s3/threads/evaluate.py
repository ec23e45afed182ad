"""The thread store's conditions and updates, applied to an item in Python (pure, no I/O).

The in-memory store evaluates here the very condition objects the DynamoDB store compiles
(:mod:`awaken_s3.threads.conditions`), and applies the same update data
(:class:`awaken_s3.threads.writes.Update`), with DynamoDB's semantics where they matter: a
comparison with a missing attribute, or between values of different types, is false; an
update's operands read the item as it was before the update. Both backends also evaluate a
part of a condition against the item a lost write returned, to tell which part failed.

Only the operators the store's conditions use are implemented; any other is refused, so a
new condition cannot be evaluated wrongly in silence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.conditions import (
    And,
    AttributeBase,
    AttributeExists,
    AttributeNotExists,
    BeginsWith,
    ConditionBase,
    Equals,
    GreaterThan,
    GreaterThanEquals,
    In,
    LessThan,
    LessThanEquals,
    Not,
    NotEquals,
    Or,
)

from awaken_s3.threads.writes import Add, CopyOf, Update

Item = Mapping[str, Any]
_MISSING = object()

_COMPARISONS: dict[type[ConditionBase], Callable[[Any, Any], bool]] = {
    Equals: lambda a, b: bool(a == b),
    NotEquals: lambda a, b: bool(a != b),
    LessThan: lambda a, b: bool(a < b),
    LessThanEquals: lambda a, b: bool(a <= b),
    GreaterThan: lambda a, b: bool(a > b),
    GreaterThanEquals: lambda a, b: bool(a >= b),
    In: lambda a, b: a in b,
    BeginsWith: lambda a, b: isinstance(a, str) and a.startswith(b),
}


def _operand(value: Any, item: Item) -> Any:
    if isinstance(value, AttributeBase):
        return item.get(value.name, _MISSING)
    return value


def _kind(value: Any) -> str:
    """DynamoDB's type of a value: values compare only within one type."""
    if isinstance(value, bool):
        return "BOOL"
    if isinstance(value, int | float | Decimal):
        return "N"
    return type(value).__name__


def holds(condition: ConditionBase | None, item: Item | None) -> bool:
    """Whether ``condition`` holds for ``item`` (None: no item, as for a key never written)."""
    if condition is None:
        return True
    current: Item = item or {}
    values = condition.get_expression()["values"]
    kind = type(condition)
    if kind is And:
        return holds(values[0], current) and holds(values[1], current)
    if kind is Or:
        return holds(values[0], current) or holds(values[1], current)
    if kind is Not:
        return not holds(values[0], current)
    if kind is AttributeExists:
        return values[0].name in current
    if kind is AttributeNotExists:
        return values[0].name not in current
    compare = _COMPARISONS.get(kind)
    if compare is None:
        raise NotImplementedError(f"no evaluation of {kind.__name__} conditions")
    left = _operand(values[0], current)
    right = _operand(values[1], current)
    if left is _MISSING or right is _MISSING:
        return False
    if kind is In:
        return any(_kind(left) == _kind(choice) and left == choice for choice in right)
    if _kind(left) != _kind(right):
        # A comparison of a number with a string (or anything with a missing attribute) is
        # false in DynamoDB, never an error.
        return False
    return compare(left, right)


def updated(update: Update, item: Item | None) -> dict[str, Any]:
    """The item after ``update`` (an absent item starts as its key, as in DynamoDB)."""
    before: Item = item if item is not None else update.key
    after = {**update.key, **before}
    for name, value in update.set.items():
        if isinstance(value, Add):
            after[name] = before.get(name, 0) + value.amount
        elif isinstance(value, CopyOf):
            if value.source not in before:
                raise KeyError(f"{value.source} is not an attribute of the item")
            after[name] = before[value.source]
        else:
            after[name] = value
    for name in update.remove:
        after.pop(name, None)
    return after
