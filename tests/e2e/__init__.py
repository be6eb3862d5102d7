"""End-to-end tests: the sample project's demo page in headless Chromium."""
