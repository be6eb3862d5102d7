"""Integration tests: real server processes driven over the network."""
