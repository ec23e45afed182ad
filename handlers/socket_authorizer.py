"""Lambda entry point: the WebSocket API's $connect authorizer (the caller's JWT)."""

from awaken_s3.service.socket_auth import lambda_handler

__all__ = ["lambda_handler"]
