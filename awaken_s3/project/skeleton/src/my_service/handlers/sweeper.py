"""The sweeper function (template.yaml: SweeperFunction): re-sends runs nobody drives."""

from my_service.agents import app

lambda_handler = app.sweeper_handler()
