"""The Lambda entry points template.yaml names: each builds its function's handler for the app."""
