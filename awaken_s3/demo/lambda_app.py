"""The demo's worker function: the real SQS worker handler, serving the demo's app with the
demo's scripted model.

The demo's event-source emulator imports this in each worker container
(``awaken_s3.demo.lambda_app:lambda_handler``), as Lambda would import a deployment's handler.
The demo is a user of the same API as any project: an app of one agent, whose worker handler
the app builds.
"""

from __future__ import annotations

from awaken_s3.agents import Agent, App
from awaken_s3.demo.model import ContinuingModel

app = App([Agent("demo", description="Explains stream checkpoints, in one paragraph.")])

lambda_handler = app.worker_handler(provider_factory=ContinuingModel)
