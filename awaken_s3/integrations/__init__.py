"""Resumable model turns for agent frameworks: wrap a framework's model, keep its agent loop.

* :mod:`awaken_s3.integrations.strands`: Strands Agents (extra ``awaken-s3[strands]``)
* :mod:`awaken_s3.integrations.pydantic_ai`: Pydantic AI (extra ``awaken-s3[pydantic-ai]``)

Each exposes ``ResumableModel(model, store=..., key=...)``. The wrapped model's stream runs
through the same turn runner as the service (checkpoints, R1-R4, the seam check); the
framework receives the whole turn: the recovered prefix first, then the continuation. A
checkpoint answers only the request it was written for and is deleted once the framework has
the whole turn; a whole agent run survives a crash with the framework's own persistence of
its conversation (``invoke_resumable``, ``run_resumable``). :func:`checkpoint_key` derives a
key from the run's ids.
"""

from awaken_s3.integrations._turns import ResumableTurnError, checkpoint_key

__all__ = ["ResumableTurnError", "checkpoint_key"]
