"""Lambda entry point: the WebSocket API's routes ($connect, follow, cancel, $disconnect)."""

from awaken_s3.service.socket import lambda_handler

__all__ = ["lambda_handler"]
