"""The worker handler as ``awaken-s3 dev`` runs it in its local containers.

It is the deployed worker (:func:`awaken_s3.service.worker.make_handler`) serving the app the
dev server was given (``AWAKEN_DEV_APP``, ``MODULE:ATTRIBUTE``; the dev app when unset), with
the scripted model that can call that app's tools, unless the dev server was given a real
provider (``AWAKEN_DEV_MODEL=provider``: each agent's provider is then built from the same
``AWAKEN_PROVIDER``, ``AWAKEN_MODEL``, ... settings as on Lambda).
"""

from __future__ import annotations

import os

from awaken_s3.service.worker import ProviderFactory, make_handler
from awaken_s3.streaming.provider import Provider

#: the app the dev stack serves when it is given none
DEV_APP = "awaken_s3.dev.model:dev_app"


def scripted() -> Provider:
    from awaken_s3.dev.model import dev_model

    return dev_model(
        chunk=int(os.environ.get("AWAKEN_DEV_SCRIPTED_CHUNK") or 4),
        delay=float(os.environ.get("AWAKEN_DEV_SCRIPTED_DELAY") or 0.08),
    )


def _provider_factory() -> ProviderFactory | None:
    if os.environ.get("AWAKEN_DEV_MODEL", "scripted") == "scripted":
        return scripted
    return None  # what the deployed worker does: each agent's configured provider


lambda_handler = make_handler(
    app=os.environ.get("AWAKEN_DEV_APP") or DEV_APP, provider_factory=_provider_factory()
)
