"""Who calls the MCP tools.

Over streamable HTTP the caller is the principal of a bearer token of this ledger (from
``pivotal tokens create --role agent``), checked with the hash the HTTP API keeps: an
unknown or revoked token is refused with 401, a token of another role with 403. The token
is only ever compared with the ledger; it is never sent anywhere.

Over stdio (a local process started by the agent's host) the caller is the name the MCP
client gave in its ``initialize`` request. Either way the name comes from the connection,
never from a tool argument, so a caller cannot claim to be someone else in a plan's
provenance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from pivotal.people.principals import Role, hash_token
from pivotal.store.base import Store

MAX_TOKEN = 512  # characters of a bearer token read, as the HTTP API reads them
MAX_NAME = 200
ANONYMOUS = "mcp-client"  # a stdio client that gave no name


@dataclass(frozen=True, slots=True)
class Caller:
    """The agent behind a tool call: its name (the provenance actor id) and whether a
    token of this ledger proved it."""

    name: str
    authenticated: bool
    require_on_behalf_of: bool = False  # its token requires plans to name whom they are for


class LedgerTokens:
    """A ``TokenVerifier`` over the ledger's bearer tokens: any token the ledger knows and
    has not revoked is accepted with its role as its only scope (the server requires the
    ``agent`` scope, so another role is refused with 403)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def verify_token(self, token: str) -> AccessToken | None:
        if not token or len(token) > MAX_TOKEN:
            return None
        found = await self.store.token_by_hash(hash_token(token))
        if found is None or found.revoked_at is not None:
            return None
        return AccessToken(
            token=f"token:{found.id}",  # the secret itself is not kept past this call
            client_id=found.name,
            scopes=[found.role],
            claims={
                "token_id": found.id,
                "role": found.role,
                "require_on_behalf_of": found.require_on_behalf_of,
            },
        )


def auth_settings(url: str) -> AuthSettings:
    """Bearer tokens of role ``agent`` are required; ``url`` is where this server is served
    (the tokens' issuer: this deployment's ledger)."""
    return AuthSettings(
        issuer_url=url,  # pydantic parses the URL
        resource_server_url=None,
        required_scopes=[Role.AGENT.value],
        validate_token_resource=False,
    )


def caller(ctx: Context[Any, Any], *, authenticated: bool) -> Caller:
    """The calling agent. With ``authenticated`` (the HTTP transport) a verified token is
    required; otherwise the MCP client's name from its initialize request is used."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    if isinstance(user, AuthenticatedUser):
        claims = user.access_token.claims or {}
        strict = claims.get("require_on_behalf_of") is True
        return Caller(user.access_token.client_id, authenticated=True, require_on_behalf_of=strict)
    if authenticated:
        raise ToolError(
            "this server needs a bearer token of role agent (Authorization: Bearer <token>); "
            "create one with `pivotal tokens create --name NAME --role agent`"
        )
    params = ctx.request_context.session.client_params
    name = params.client_info.name.strip() if params is not None else ""
    if not name or not name.isprintable():
        name = ANONYMOUS
    return Caller(name[:MAX_NAME], authenticated=False)
