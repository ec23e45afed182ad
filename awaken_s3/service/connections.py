"""The WebSocket API's connection records in DynamoDB (``AWAKEN_CONNECTIONS_TABLE``).

Two kinds of item, both expiring (the table's TTL attribute ``expires_at``; API Gateway closes
a connection after two hours at most, and DynamoDB's TTL deletes lazily, so reads skip an
expired item themselves):

* a connection: ``pk = CONN#<connection id>``, ``sk = CONN``: its owner (the authorizer's
  ``sub``) and the runs it follows (at most :data:`MAX_FOLLOWS`);
* a follower: ``pk = FOLLOW#<run id>``, ``sk = CONN#<connection id>``: where the follower
  stood when it was last recorded (turn, offset, tool calls), which a worker that has not
  served it yet sends from.

A worker lists a run's followers with one consistent ``Query`` of the run's partition (no
index: an index is eventually consistent, and a follower recorded just before a run ended
must be seen by the worker's last look). Expressions are built by boto3's condition builder
and values by its serializer. Every failure is a :class:`ConnectionStoreError`.
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from boto3.dynamodb.conditions import Attr, ConditionBase, ConditionExpressionBuilder, Key
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from awaken_s3.errors import AwakenError
from awaken_s3.service.frames import Position

#: API Gateway's longest connection (2 hours), and a margin for clocks
CONNECTION_TTL: Final = 2 * 3600 + 300
#: runs one connection may follow at once (a follow ends with the run's end, or a disconnect):
#: a bound on its item, on its ``$disconnect``'s work, and on what one caller makes a worker
#: send
MAX_FOLLOWS: Final = 16
_serialize = TypeSerializer().serialize
_deserialize = TypeDeserializer().deserialize


def connections_table() -> str | None:
    """The connection table (``AWAKEN_CONNECTIONS_TABLE``); None: no WebSocket API, so no
    live pushes (the HTTP API's polling still serves every caller)."""
    return os.environ.get("AWAKEN_CONNECTIONS_TABLE") or None


class ConnectionStoreError(AwakenError):
    """The connection table could not be read or written (the message says which call)."""


def table_definition() -> dict[str, Any]:
    """The connection table's keys (``CreateTable`` arguments; template.yaml's ConnectionTable
    is checked against it). Its TTL attribute is :data:`TTL_ATTRIBUTE`."""
    return {
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "BillingMode": "PAY_PER_REQUEST",
    }


TTL_ATTRIBUTE: Final = "expires_at"


def _connection_key(connection_id: str) -> dict[str, Any]:
    return {"pk": _serialize(f"CONN#{connection_id}"), "sk": _serialize("CONN")}


def _follower_key(run_id: str, connection_id: str) -> dict[str, Any]:
    return {"pk": _serialize(f"FOLLOW#{run_id}"), "sk": _serialize(f"CONN#{connection_id}")}


def _expression(condition: ConditionBase, *, key: bool = False) -> dict[str, Any]:
    built = ConditionExpressionBuilder().build_expression(condition, is_key_condition=key)
    return {
        "names": built.attribute_name_placeholders,
        "values": {k: _serialize(v) for k, v in built.attribute_value_placeholders.items()},
        "expression": built.condition_expression,
    }


class Followed(enum.Enum):
    """What became of a follow."""

    RECORDED = "recorded"
    #: the connection is not recorded (it went away): nothing was written
    GONE = "gone"
    #: the connection already follows :data:`MAX_FOLLOWS` other runs: nothing was written
    FULL = "full"


@dataclass(frozen=True, slots=True)
class Follower:
    connection_id: str
    #: the run's id as the follower's caller names it (frames carry it)
    run_id: str
    position: Position


@dataclass(frozen=True, slots=True)
class Connection:
    connection_id: str
    owner: str
    follows: frozenset[str]


class ConnectionStore:
    """Connection and follower records over an (aiobotocore) DynamoDB client."""

    def __init__(self, table: str, client: Any, *, clock: Callable[[], float] = time.time) -> None:
        self.table = table
        self._db = client
        self._clock = clock

    async def _call(self, what: str, method: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return await method(TableName=self.table, **kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise ConnectionStoreError(f"{what} on table {self.table} failed: {exc}") from exc

    def _expires(self) -> Any:
        return _serialize(int(self._clock() + CONNECTION_TTL))

    async def connect(self, connection_id: str, *, owner: str) -> None:
        item = {
            **_connection_key(connection_id),
            "owner": _serialize(owner),
            "connected_at": _serialize(int(self._clock())),
            TTL_ATTRIBUTE: self._expires(),
        }
        await self._call("connect", self._db.put_item, Item=item)

    async def connection(self, connection_id: str) -> Connection | None:
        answer = await self._call(
            "get connection",
            self._db.get_item,
            Key=_connection_key(connection_id),
            ConsistentRead=True,
        )
        item = answer.get("Item")
        if item is None or int(_deserialize(item[TTL_ATTRIBUTE])) < self._clock():
            return None
        follows = _deserialize(item["follows"]) if "follows" in item else set()
        return Connection(connection_id, str(_deserialize(item["owner"])), frozenset(follows))

    async def follow(
        self, connection_id: str, run_id: str, position: Position, *, public_run_id: str
    ) -> Followed:
        """Record the follower at ``position`` (what it was sent), and the run on its
        connection (so ``$disconnect`` finds it), in one transaction: only while the
        connection is recorded (a connection that went away meanwhile is not brought back, and
        leaves no follower behind) and follows fewer than :data:`MAX_FOLLOWS` other runs."""
        room = Attr("pk").exists() & (
            Attr("follows").not_exists()
            | Attr("follows").size().lt(MAX_FOLLOWS)
            | Attr("follows").contains(run_id)
        )
        condition = _expression(room)
        follower = {
            **_follower_key(run_id, connection_id),
            "connection_id": _serialize(connection_id),
            "run_id": _serialize(public_run_id),
            **self._position_item(position),
        }
        update = {
            "TableName": self.table,
            "Key": _connection_key(connection_id),
            "UpdateExpression": "ADD follows :run",
            "ConditionExpression": condition["expression"],
            "ExpressionAttributeNames": condition["names"],
            "ExpressionAttributeValues": {**condition["values"], ":run": {"SS": [run_id]}},
        }
        try:
            await self._db.transact_write_items(
                TransactItems=[
                    {"Update": update},
                    {"Put": {"TableName": self.table, "Item": follower}},
                ]
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise ConnectionStoreError(f"follow on table {self.table} failed: {exc}") from exc
            # The connection's condition failed (the put has none): gone, or full.
            gone = await self.connection(connection_id) is None
            return Followed.GONE if gone else Followed.FULL
        except BotoCoreError as exc:
            raise ConnectionStoreError(f"follow on table {self.table} failed: {exc}") from exc
        return Followed.RECORDED

    def _position_item(self, position: Position) -> dict[str, Any]:
        return {
            "turn": _serialize(position.turn),
            "offset": _serialize(position.offset),
            "calls": _serialize(position.calls),
            TTL_ATTRIBUTE: self._expires(),
        }

    async def advance(self, run_id: str, connection_id: str, position: Position) -> None:
        """Move a recorded follower on (at a turn's commit), never bringing a forgotten one
        back: a worker that takes over after a crash re-sends from here, not from the start."""
        exists = _expression(Attr("pk").exists())
        values = self._position_item(position)
        try:
            await self._db.update_item(
                TableName=self.table,
                Key=_follower_key(run_id, connection_id),
                UpdateExpression="SET #t = :turn, #o = :offset, #c = :calls, #x = :expires",
                ConditionExpression=exists["expression"],
                ExpressionAttributeNames={
                    **exists["names"],
                    "#t": "turn",
                    "#o": "offset",
                    "#c": "calls",
                    "#x": TTL_ATTRIBUTE,
                },
                ExpressionAttributeValues={
                    ":turn": values["turn"],
                    ":offset": values["offset"],
                    ":calls": values["calls"],
                    ":expires": values[TTL_ATTRIBUTE],
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return  # forgotten meanwhile: it stays forgotten
            raise ConnectionStoreError(f"advance on table {self.table} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise ConnectionStoreError(f"advance on table {self.table} failed: {exc}") from exc

    async def followers(self, run_id: str) -> list[Follower]:
        key = _expression(Key("pk").eq(f"FOLLOW#{run_id}"), key=True)
        found: list[Follower] = []
        start: dict[str, Any] | None = None
        while True:
            extra = {"ExclusiveStartKey": start} if start else {}
            page = await self._call(
                "list followers",
                self._db.query,
                KeyConditionExpression=key["expression"],
                ExpressionAttributeNames=key["names"],
                ExpressionAttributeValues=key["values"],
                ConsistentRead=True,
                **extra,
            )
            now = self._clock()
            for item in page.get("Items", ()):
                value = {name: _deserialize(attr) for name, attr in item.items()}
                if int(value[TTL_ATTRIBUTE]) < now:
                    continue
                position = Position(int(value["turn"]), int(value["offset"]), int(value["calls"]))
                found.append(Follower(str(value["connection_id"]), str(value["run_id"]), position))
            start = page.get("LastEvaluatedKey")
            if not start:
                return found

    async def unfollow(self, run_id: str, connection_id: str) -> None:
        """Forget one follower's item (a gone connection's, before :meth:`forget`)."""
        await self._call(
            "forget follower", self._db.delete_item, Key=_follower_key(run_id, connection_id)
        )

    async def end_follow(self, run_id: str, connection_id: str) -> None:
        """End one follow of a live connection (the run ended): the follower's item, and the
        run on its connection's list, where it counts towards :data:`MAX_FOLLOWS`."""
        await self.unfollow(run_id, connection_id)
        exists = _expression(Attr("pk").exists())
        try:
            await self._db.update_item(
                TableName=self.table,
                Key=_connection_key(connection_id),
                UpdateExpression="DELETE follows :run",
                ConditionExpression=exists["expression"],
                ExpressionAttributeNames=exists["names"],
                ExpressionAttributeValues={":run": {"SS": [run_id]}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return  # the connection is gone: nothing lists the follow
            raise ConnectionStoreError(f"end follow on table {self.table} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise ConnectionStoreError(f"end follow on table {self.table} failed: {exc}") from exc

    async def forget(self, connection_id: str) -> None:
        """Forget a connection and everything it followed (``$disconnect``, or gone). The
        connection's item goes first, and its follows are read from what was deleted: a
        follow recorded meanwhile either made it into that item (and is deleted here) or
        found no connection (and recorded nothing)."""
        answer = await self._call(
            "forget connection",
            self._db.delete_item,
            Key=_connection_key(connection_id),
            ReturnValues="ALL_OLD",
        )
        old = answer.get("Attributes") or {}
        for run_id in sorted(_deserialize(old["follows"])) if "follows" in old else ():
            await self._call(
                "forget follower", self._db.delete_item, Key=_follower_key(run_id, connection_id)
            )
