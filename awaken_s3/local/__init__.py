"""Local stand-ins for AWS: moto and SeaweedFS servers on 127.0.0.1 only, and an SQS event
source that runs Lambda handlers in local containers (see docs/LOCAL.md).

Used by the tests, the benchmarks and the local demo. Every server and container is started
on loopback and stopped by its PID. Nothing is imported here: a container runs
``python -m awaken_s3.local.lambda_host`` and must not pay for the event source's imports.
"""
