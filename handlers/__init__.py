"""AWS Lambda entry points: ``handlers.worker.lambda_handler`` (SQS) and
``handlers.api.lambda_handler`` (API Gateway HTTP API). Thin shells over awaken_s3."""
