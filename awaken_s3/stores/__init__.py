"""Stream-checkpoint stores: one contract, one module per backend.

Import a backend from its module (``awaken_s3.stores.s3``) or from the
package root (``awaken_s3.S3StreamCheckpointStore``, loaded on first use).
"""

from awaken_s3.stores.base import StreamCheckpointStore
from awaken_s3.stores.memory import InMemoryStreamCheckpointStore

__all__ = ["InMemoryStreamCheckpointStore", "StreamCheckpointStore"]
