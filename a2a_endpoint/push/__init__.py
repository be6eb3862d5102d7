"""Push notifications (A2A §4.3, §13.2): webhooks of tasks, and their deliveries.

- ``ssrf``: which webhook URLs the server may call, and the addresses to connect to;
- ``configs``: what a config may hold, checked before it is stored;
- ``sender``: the outbox's sender (one config at a time, in event order, at least once).

The configs and the outbox rows are written by the store; the execution backend decides
where the sender runs (a thread pool in this process, or Celery workers).
"""
