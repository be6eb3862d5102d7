"""The A2A operations, transport-agnostic: one method per spec operation."""

from a2a_endpoint.service.handler import RequestHandler, get_request_handler

__all__ = ["RequestHandler", "get_request_handler"]
