"""The worker function (template.yaml: WorkerFunction): drives runs from the SQS queue."""

from my_service.agents import app

lambda_handler = app.worker_handler()
