"""URLs: the agent card at /.well-known/agent-card.json and the JSON-RPC endpoint at /a2a/."""

from django.urls import path

from a2a_endpoint import views

app_name = "a2a_endpoint"

urlpatterns = [
    path(".well-known/agent-card.json", views.AgentCardView.as_view(), name="agent-card"),
    path("a2a/", views.JsonRpcView.as_view(), name="jsonrpc"),
    # The same endpoint without the slash: POSTs cannot follow APPEND_SLASH redirects.
    path("a2a", views.JsonRpcView.as_view(), name="jsonrpc-no-slash"),
]
