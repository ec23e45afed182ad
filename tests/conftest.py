"""Suite-wide settings. Fixtures of one area live in that area's conftest."""

from __future__ import annotations

import os

# Never let a test reach real AWS with a developer's credentials.
for _name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
    os.environ.pop(_name, None)
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ.pop("AWS_ENDPOINT_URL", None)
