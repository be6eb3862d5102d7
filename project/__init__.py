"""The sample Django project: serves the demo agents with a2a_endpoint (``make run``)."""
