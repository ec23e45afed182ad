"""The worker handler as ``awaken-s3 dev`` runs it in its local containers.

It is the deployed worker (:func:`awaken_s3.service.worker.make_handler`), with the dev tool
registered, and the scripted model unless the
dev server was given a real provider (``AWAKEN_DEV_MODEL=provider``: built from the same
``AWAKEN_PROVIDER``, ``AWAKEN_MODEL``, ... settings as on Lambda).
"""

from __future__ import annotations

import os

from awaken_s3.dev.model import DevModel, dev_tools
from awaken_s3.providers.config import ProviderSettings, build_provider
from awaken_s3.service.worker import make_handler
from awaken_s3.streaming.provider import Provider


def provider() -> Provider:
    if os.environ.get("AWAKEN_DEV_MODEL", "scripted") == "scripted":
        return DevModel(
            chunk=int(os.environ.get("AWAKEN_DEV_SCRIPTED_CHUNK") or 4),
            delay=float(os.environ.get("AWAKEN_DEV_SCRIPTED_DELAY") or 0.08),
        )
    # What the deployed worker builds: the same AWAKEN_PROVIDER, AWAKEN_MODEL, ... settings.
    return build_provider(ProviderSettings.from_env())


lambda_handler = make_handler(tools=dev_tools(), provider_factory=provider)
