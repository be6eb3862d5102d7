"""The official a2a-sdk client authenticates to a closed daphne (PostgreSQL) with a DRF token
and with a JWT, through the SDK's AuthInterceptor and the card's security schemes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.client.errors import A2AClientError
from a2a.helpers import new_text_message
from a2a.types import (
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageRequest,
    TaskNotFoundError,
    TaskState,
)

from tests.integration.conftest import HTTP_TIMEOUT
from tests.integration.servers import DaphneServer, django_env, run_django

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

SETTINGS = "tests.integration.auth_settings"

MAKE_USERS = """
import json
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework_simplejwt.tokens import AccessToken
users = {name: get_user_model().objects.create_user(name) for name in ("alice", "bob")}
print(json.dumps({
    "alice": {"token": Token.objects.create(user=users["alice"]).key},
    "bob": {"jwt": str(AccessToken.for_user(users["bob"]))},
}))
"""


@pytest.fixture(scope="module")
def server(postgres_database_url: str, tmp_path_factory) -> Iterator[tuple[DaphneServer, Any]]:
    workdir = tmp_path_factory.mktemp("auth-server")
    env = django_env(SETTINGS, A2A_IT_POSTGRES_URL=postgres_database_url)
    run_django(["migrate", "--noinput"], env)
    credentials = json.loads(run_django(["shell", "-c", MAKE_USERS], env).strip().splitlines()[-1])
    with DaphneServer("tests.integration.asgi:application", env=env, log_dir=workdir) as daphne:
        yield daphne, credentials


class Credentials(CredentialService):
    """One credential per scheme name of the card ("bearer" for the token, "jwt")."""

    def __init__(self, **by_scheme: str) -> None:
        self.by_scheme = by_scheme

    async def get_credentials(self, security_scheme_name: str, context: Any) -> str | None:
        return self.by_scheme.get(security_scheme_name)


async def sdk_client(server: DaphneServer, **by_scheme: str) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as http:
        card = await A2ACardResolver(http, server.base_url).get_agent_card()
        config = ClientConfig(streaming=False, polling=False, httpx_client=http)
        client = ClientFactory(config).create(
            card, interceptors=[AuthInterceptor(Credentials(**by_scheme))]
        )
        try:
            yield client
        finally:
            await client.close()


@pytest.fixture
async def alice(server) -> AsyncIterator[Client]:
    daphne, credentials = server
    async for client in sdk_client(daphne, bearer=credentials["alice"]["token"]):
        yield client


@pytest.fixture
async def bob(server) -> AsyncIterator[Client]:
    daphne, credentials = server
    async for client in sdk_client(daphne, jwt=credentials["bob"]["jwt"]):
        yield client


async def send(client: Client, text: str) -> Any:
    request = SendMessageRequest(message=new_text_message(text, role=Role.ROLE_USER))
    [response] = [r async for r in client.send_message(request)]
    return response.task


async def test_the_card_declares_token_and_jwt(server):
    daphne, _ = server
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, daphne.base_url).get_agent_card()
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert card.security_schemes["jwt"].http_auth_security_scheme.bearer_format == "JWT"
    assert card.capabilities.extended_agent_card


async def test_token_and_jwt_callers_each_see_only_their_own_tasks(alice, bob):
    mine = await send(alice, "echo from alice")
    theirs = await send(bob, "echo from bob")
    assert mine.status.state == theirs.status.state == TaskState.TASK_STATE_COMPLETED

    alice_ids = [t.id for t in (await alice.list_tasks(ListTasksRequest())).tasks]
    bob_ids = [t.id for t in (await bob.list_tasks(ListTasksRequest())).tasks]
    assert mine.id in alice_ids
    assert theirs.id not in alice_ids
    assert theirs.id in bob_ids
    assert mine.id not in bob_ids
    with pytest.raises(TaskNotFoundError):
        await bob.get_task(GetTaskRequest(id=mine.id))


async def test_authenticated_callers_get_the_extended_card(alice, bob):
    for client in (alice, bob):
        card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert card.description == "The signed-in view of the test agent."
        assert card.capabilities.extended_agent_card


async def test_without_credentials_the_sdk_gets_401(server):
    daphne, _ = server
    async for client in sdk_client(daphne):
        with pytest.raises(A2AClientError, match="HTTP Error 401"):
            await send(client, "echo nobody")
