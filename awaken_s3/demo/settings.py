"""Names the demo's orchestrator and its worker processes share."""

from __future__ import annotations

BUCKET = "awaken-demo"
TABLE = "awaken-demo"
QUEUE = "awaken-demo-runs"
CHECKPOINT_PREFIX = "checkpoints/"
#: short, so the demo's resumed worker can take over a killed one within seconds
LEASE_SECONDS = 3.0
