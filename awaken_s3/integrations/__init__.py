"""Resumable model turns for agent frameworks: wrap a framework's model, keep its agent loop.

* :mod:`awaken_s3.integrations.strands`: Strands Agents (extra ``awaken-s3[strands]``)
* :mod:`awaken_s3.integrations.pydantic_ai`: Pydantic AI (extra ``awaken-s3[pydantic-ai]``)

Each exposes ``ResumableModel(model, store=..., key=...)``. The wrapped model's stream runs
through the same turn runner as the service (checkpoints, R1-R4, the seam check); the
framework receives the whole turn: the recovered prefix first, then the continuation.
"""

from awaken_s3.integrations._turns import ResumableTurnError, checkpoint_key

__all__ = ["ResumableTurnError", "checkpoint_key"]
