"""The project tests start `awaken-s3 dev` as the dev tests do (their fixture, by PID)."""

from tests.dev.conftest import dev_server_factory

__all__ = ["dev_server_factory"]
