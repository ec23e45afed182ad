"""An AWS event-stream (``application/vnd.amazon.eventstream``) frame encoder.

botocore ships only the decoder and awscrt's encoder is internal to its RPC
client, so this is a small encoder written from the framing spec:

    prelude: total length (u32 BE), headers length (u32 BE), CRC32 of those 8 bytes
    headers: name length (u8), name, value type (u8; 7 = string), length (u16 BE), value
    payload
    message CRC32 of everything before it

The tests decode its output with botocore's own ``EventStreamBuffer`` (which
checks both CRCs), and botocore parses it in every Bedrock wire test.
"""

from __future__ import annotations

import json
import struct
from binascii import crc32
from typing import Any

_STRING = 7


def _headers(headers: dict[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        raw_name = name.encode()
        raw_value = value.encode()
        out += struct.pack("!B", len(raw_name)) + raw_name
        out += struct.pack("!BH", _STRING, len(raw_value)) + raw_value
    return bytes(out)


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    raw_headers = _headers(headers)
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(raw_headers))
    prelude += struct.pack("!I", crc32(prelude) & 0xFFFFFFFF)
    body = prelude + raw_headers + payload
    return body + struct.pack("!I", crc32(body) & 0xFFFFFFFF)


def event(event_type: str, payload: dict[str, Any]) -> bytes:
    return encode_message(
        {
            ":event-type": event_type,
            ":content-type": "application/json",
            ":message-type": "event",
        },
        json.dumps(payload, separators=(",", ":")).encode(),
    )


def exception(exception_type: str, message: str) -> bytes:
    return encode_message(
        {
            ":exception-type": exception_type,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps({"message": message}).encode(),
    )
