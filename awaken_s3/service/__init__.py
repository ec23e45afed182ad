"""What the Lambda handlers share: configuration, AWS clients per invocation, the queue
message schema, the HTTP request/response models and the worker's pure decisions."""
