"""my-service: agents served by awaken-s3 (the app is in agents.py)."""
