"""The local end-to-end demo behind ``awaken-s3 demo`` (see :mod:`.scenario`).

Nothing is imported here: a worker container imports only
:mod:`awaken_s3.demo.lambda_app` and must not pay for the orchestrator's imports.
"""
