"""The agent card and its parts, security schemes included (A2A §8)."""

from __future__ import annotations

import builtins

import msgspec

from a2a_endpoint.types.base import Struct, Wire


class AgentInterface(Wire, kw_only=True):
    url: str
    protocol_binding: str
    tenant: str = ""
    protocol_version: str


class AgentProvider(Wire, kw_only=True):
    url: str
    organization: str


class AgentExtension(Wire, kw_only=True):
    uri: str = ""
    description: str = ""
    required: bool = False
    params: Struct | None = None


class AgentCapabilities(Wire, kw_only=True):
    streaming: bool | None = None
    push_notifications: bool | None = None
    extensions: list[AgentExtension] = msgspec.field(default_factory=list)
    extended_agent_card: bool | None = None


class StringList(Wire, kw_only=True):
    # "builtins.": the string annotation is evaluated in the class namespace, where ``list``
    # is this field (a bare ``list[str]`` made every decode raise TypeError).
    list: builtins.list[str] = msgspec.field(default_factory=builtins.list)


class SecurityRequirement(Wire, kw_only=True):
    schemes: dict[str, StringList] = msgspec.field(default_factory=dict)


class APIKeySecurityScheme(Wire, kw_only=True):
    description: str = ""
    location: str
    name: str


class HTTPAuthSecurityScheme(Wire, kw_only=True):
    description: str = ""
    scheme: str
    bearer_format: str = ""


class AuthorizationCodeOAuthFlow(Wire, kw_only=True):
    authorization_url: str
    token_url: str
    refresh_url: str = ""
    scopes: dict[str, str] = msgspec.field(default_factory=dict)  # MAY be empty; omitted then
    pkce_required: bool = False


class ClientCredentialsOAuthFlow(Wire, kw_only=True):
    token_url: str
    refresh_url: str = ""
    scopes: dict[str, str] = msgspec.field(default_factory=dict)  # MAY be empty; omitted then


class ImplicitOAuthFlow(Wire, kw_only=True):
    authorization_url: str = ""
    refresh_url: str = ""
    scopes: dict[str, str] = msgspec.field(default_factory=dict)


class PasswordOAuthFlow(Wire, kw_only=True):
    token_url: str = ""
    refresh_url: str = ""
    scopes: dict[str, str] = msgspec.field(default_factory=dict)


class DeviceCodeOAuthFlow(Wire, kw_only=True):
    device_authorization_url: str
    token_url: str
    refresh_url: str = ""
    scopes: dict[str, str] = msgspec.field(default_factory=dict)  # MAY be empty; omitted then


class OAuthFlows(Wire, kw_only=True):
    authorization_code: AuthorizationCodeOAuthFlow | None = None
    client_credentials: ClientCredentialsOAuthFlow | None = None
    implicit: ImplicitOAuthFlow | None = None
    password: PasswordOAuthFlow | None = None
    device_code: DeviceCodeOAuthFlow | None = None


class OAuth2SecurityScheme(Wire, kw_only=True):
    description: str = ""
    flows: OAuthFlows
    oauth2_metadata_url: str = msgspec.field(default="", name="oauth2MetadataUrl")


class OpenIdConnectSecurityScheme(Wire, kw_only=True):
    description: str = ""
    open_id_connect_url: str


class MutualTlsSecurityScheme(Wire, kw_only=True):
    description: str = ""


class SecurityScheme(Wire, kw_only=True):
    api_key_security_scheme: APIKeySecurityScheme | None = None
    http_auth_security_scheme: HTTPAuthSecurityScheme | None = None
    oauth2_security_scheme: OAuth2SecurityScheme | None = msgspec.field(
        default=None, name="oauth2SecurityScheme"
    )
    open_id_connect_security_scheme: OpenIdConnectSecurityScheme | None = None
    mtls_security_scheme: MutualTlsSecurityScheme | None = None


class AgentSkill(Wire, kw_only=True):
    id: str
    name: str
    description: str
    tags: list[str]
    examples: list[str] = msgspec.field(default_factory=list)
    input_modes: list[str] = msgspec.field(default_factory=list)
    output_modes: list[str] = msgspec.field(default_factory=list)
    security_requirements: list[SecurityRequirement] = msgspec.field(default_factory=list)


class AgentCardSignature(Wire, kw_only=True):
    protected: str
    signature: str
    header: Struct | None = None


class AgentCard(Wire, kw_only=True):
    name: str
    description: str
    supported_interfaces: list[AgentInterface]
    provider: AgentProvider | None = None
    version: str
    documentation_url: str | None = None
    capabilities: AgentCapabilities
    security_schemes: dict[str, SecurityScheme] = msgspec.field(default_factory=dict)
    security_requirements: list[SecurityRequirement] = msgspec.field(default_factory=list)
    default_input_modes: list[str]
    default_output_modes: list[str]
    skills: list[AgentSkill]
    signatures: list[AgentCardSignature] = msgspec.field(default_factory=list)
    icon_url: str | None = None
