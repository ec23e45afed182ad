"""The local end-to-end demo behind ``awaken-s3 demo`` (see :mod:`.scenario`).

Nothing is imported here: ``python -m awaken_s3.demo.worker`` must not find its
own module already loaded by the package.
"""
