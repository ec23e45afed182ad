"""The thread store's write data compiled into DynamoDB requests (pure, no I/O).

Conditions are compiled by boto3's own expression builder
(:class:`~boto3.dynamodb.conditions.ConditionExpressionBuilder`), values serialised by boto3's
:class:`~boto3.dynamodb.types.TypeSerializer`; update expressions are built here from the
:class:`~awaken_s3.threads.writes.Update`'s parts. No caller writes or edits an expression
string, and the conditions are the ones the in-memory store evaluates
(tests/threads/test_expressions.py pins both).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from boto3.dynamodb.conditions import ConditionBase, ConditionExpressionBuilder

from awaken_s3.threads import writes
from awaken_s3.threads.codec import to_wire
from awaken_s3.threads.writes import SWEEP_INDEX, Add, CopyOf

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.type_defs import GlobalSecondaryIndexTypeDef

Request = dict[str, Any]
_ALL_OLD: Final = {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"}


def _expressions(
    builder: ConditionExpressionBuilder,
    condition: ConditionBase | None,
    *,
    key: bool = False,
    update: writes.Update | None = None,
) -> Request:
    """``ConditionExpression`` (or ``KeyConditionExpression``), ``UpdateExpression`` and
    their placeholders, each defined once and each used (DynamoDB rejects either fault)."""
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    request: Request = {}
    if condition is not None:
        built = builder.build_expression(condition, is_key_condition=key)
        request["KeyConditionExpression" if key else "ConditionExpression"] = (
            built.condition_expression
        )
        names |= built.attribute_name_placeholders
        values |= built.attribute_value_placeholders
    if update is not None:
        expression, update_names, update_values = update_expression(update)
        request["UpdateExpression"] = expression
        names |= update_names
        values |= update_values
    if names:
        request["ExpressionAttributeNames"] = names
    if values:
        request["ExpressionAttributeValues"] = to_wire(values)
    return request


def update_expression(update: writes.Update) -> tuple[str, dict[str, str], dict[str, Any]]:
    """``SET ... REMOVE ...`` with placeholders of its own (``#u``, ``:u``): every attribute
    name goes through one, since status, error and owner are DynamoDB reserved words."""
    names: dict[str, str] = {}
    values: dict[str, Any] = {}

    def name(attribute: str) -> str:
        placeholder = f"#u{len(names)}"
        names[placeholder] = attribute
        return placeholder

    def value(operand: Any) -> str:
        placeholder = f":u{len(values)}"
        values[placeholder] = operand
        return placeholder

    sets = []
    for attribute, operand in update.set.items():
        target = name(attribute)
        if isinstance(operand, Add):
            sets.append(f"{target} = if_not_exists({target}, {value(0)}) + {value(operand.amount)}")
        elif isinstance(operand, CopyOf):
            sets.append(f"{target} = {name(operand.source)}")
        else:
            sets.append(f"{target} = {value(operand)}")
    expression = "SET " + ", ".join(sets)
    if update.remove:
        expression += " REMOVE " + ", ".join(name(attribute) for attribute in update.remove)
    return expression, names, values


def put_request(table: str, put: writes.Put) -> Request:
    request: Request = {"TableName": table, "Item": to_wire(put.item)}
    request |= _expressions(ConditionExpressionBuilder(), put.condition)
    return request | (_ALL_OLD if put.return_old else {})


def update_request(table: str, update: writes.Update) -> Request:
    request: Request = {"TableName": table, "Key": to_wire(update.key)}
    request |= _expressions(ConditionExpressionBuilder(), update.condition, update=update)
    return request | (_ALL_OLD if update.return_old else {})


def single_write_request(table: str, write: writes.Put | writes.Update) -> Request:
    """``PutItem`` or ``UpdateItem`` arguments: the item after an update, the stored item
    when the condition is lost (the store tells from it which part failed)."""
    if isinstance(write, writes.Put):
        return put_request(table, write) | _ALL_OLD
    return update_request(table, write) | _ALL_OLD | {"ReturnValues": "ALL_NEW"}


def transact_items(table: str, items: Sequence[writes.Write]) -> list[Request]:
    """``TransactItems`` for the writes, in order (the cancellation reasons follow it)."""
    compiled: list[Request] = []
    for write in items:
        if isinstance(write, writes.Put):
            compiled.append({"Put": put_request(table, write)})
        elif isinstance(write, writes.Update):
            compiled.append({"Update": update_request(table, write)})
        else:
            check: Request = {"TableName": table, "Key": to_wire(write.key)}
            check |= _expressions(ConditionExpressionBuilder(), write.condition)
            compiled.append({"ConditionCheck": check | (_ALL_OLD if write.return_old else {})})
    return compiled


def query_request(table: str, query: writes.Query) -> Request:
    request: Request = {"TableName": table}
    request |= _expressions(ConditionExpressionBuilder(), query.key_condition, key=True)
    if query.index is not None:
        request["IndexName"] = query.index
    if query.limit is not None:
        request["Limit"] = query.limit
    if query.consistent:
        request["ConsistentRead"] = True
    return request


def table_definition() -> Request:
    """The table's keys, attributes and indexes, as ``create_table`` creates them and
    template.yaml declares them (tests/infra compares the two)."""
    return {
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "sweep_shard", "AttributeType": "S"},
            {"AttributeName": "sweep_at", "AttributeType": "N"},
        ],
        "GlobalSecondaryIndexes": [sweep_index_definition()],
        "BillingMode": "PAY_PER_REQUEST",
    }


def sweep_index_definition() -> GlobalSecondaryIndexTypeDef:
    """The sparse global secondary index, as ``create_table`` and template.yaml define it."""
    return {
        "IndexName": SWEEP_INDEX,
        "KeySchema": [
            {"AttributeName": "sweep_shard", "KeyType": "HASH"},
            {"AttributeName": "sweep_at", "KeyType": "RANGE"},
        ],
        # The sweeper re-reads each run consistently anyway: keys are all it needs.
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    }
