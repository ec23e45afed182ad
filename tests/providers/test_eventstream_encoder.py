"""The test encoder produces frames botocore's own decoder accepts (CRCs included)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer

from tests.providers.wire.eventstream import encode_message, event, exception


def test_botocore_decodes_event_and_exception_frames() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "é"}}))
    buffer.add_data(exception("throttlingException", "slow down"))
    # botocore-stubs mistypes EventStreamMessage.headers as int.
    messages: list[Any] = list(buffer)
    first, second = messages
    assert first.headers == {
        ":event-type": "contentBlockDelta",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    assert json.loads(first.payload) == {"contentBlockIndex": 0, "delta": {"text": "é"}}
    assert second.headers[":exception-type"] == "throttlingException"
    assert second.to_response_dict()["status_code"] == 400


def test_a_flipped_payload_byte_fails_the_message_crc() -> None:
    frame = bytearray(encode_message({":message-type": "event"}, b'{"a":1}'))
    frame[-6] ^= 0xFF
    buffer = EventStreamBuffer()
    buffer.add_data(bytes(frame))
    with pytest.raises(ChecksumMismatch):
        list(buffer)
