"""API keys that never leak into logs, reprs or checkpoints."""

from __future__ import annotations

from pydantic import SecretStr

ApiKey = str | SecretStr


def reveal(key: ApiKey | None) -> str | None:
    """The plain key, for handing to an SDK client and nowhere else."""
    if key is None:
        return None
    return key.get_secret_value() if isinstance(key, SecretStr) else key
