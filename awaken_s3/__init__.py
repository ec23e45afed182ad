"""awaken-s3: streaming LLM turns that survive the death of their process."""

from awaken_s3.errors import (
    CheckpointCorrupt,
    CheckpointFenced,
    CheckpointTooLarge,
    StreamCheckpointError,
)
from awaken_s3.ids import InvalidIdError
from awaken_s3.models import PartialToolCall, StoredCheckpoint, StreamCheckpoint
from awaken_s3.stores import InMemoryStreamCheckpointStore, StreamCheckpointStore

__all__ = [
    "CheckpointCorrupt",
    "CheckpointFenced",
    "CheckpointTooLarge",
    "InMemoryStreamCheckpointStore",
    "InvalidIdError",
    "PartialToolCall",
    "StoredCheckpoint",
    "StreamCheckpoint",
    "StreamCheckpointError",
    "StreamCheckpointStore",
]
