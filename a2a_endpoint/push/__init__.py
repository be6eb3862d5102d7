"""Push notifications (A2A §4.3, §13.2): where webhooks may be sent.

Only the SSRF guard is here so far (``push.ssrf``); the config methods and the delivery
outbox build on it.
"""
