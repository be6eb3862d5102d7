"""Benchmark of a2a_endpoint against the a2a-sdk reference server and a bare ASGI ceiling."""
