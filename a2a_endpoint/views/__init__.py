"""HTTP transport: the JSON-RPC endpoint (POST, JSON or SSE) and the public agent card.

One module per concern: ``jsonrpc`` (the endpoint), ``card`` (the agent card) and
``observed`` (what a request tells the logs and metrics; streams refused under WSGI).
"""

from a2a_endpoint.views.card import AgentCardView
from a2a_endpoint.views.jsonrpc import JsonRpcView

__all__ = ["AgentCardView", "JsonRpcView"]
