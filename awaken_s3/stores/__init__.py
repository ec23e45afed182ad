"""Stream-checkpoint stores: one contract, one module per backend.

Import a backend from its module (``awaken_s3.stores.s3``) or from the
package root (``awaken_s3.S3StreamCheckpointStore``, loaded on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from awaken_s3._lazy import lazy_exports

if TYPE_CHECKING:
    from awaken_s3.stores.base import StreamCheckpointStore as StreamCheckpointStore
    from awaken_s3.stores.memory import (
        InMemoryStreamCheckpointStore as InMemoryStreamCheckpointStore,
    )

__getattr__, __dir__, __all__ = lazy_exports(__name__)
