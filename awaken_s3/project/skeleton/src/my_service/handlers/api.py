"""The HTTP API function (template.yaml: ApiFunction): threads, runs, the agents' list."""

from my_service.agents import app

lambda_handler = app.api_handler()
