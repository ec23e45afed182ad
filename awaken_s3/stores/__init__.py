"""Stream-checkpoint stores: one contract, one module per backend."""

from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore

__all__ = ["InMemoryStreamCheckpointStore", "StreamCheckpointStore"]
