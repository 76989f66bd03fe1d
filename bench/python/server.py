"""The Python SDK comparator of the benchmark (bench/ in mcp-connect).

What a user would write instead of mcp-connect with the MCP Python SDK v2:
an `MCPServer` served over stateless Streamable HTTP (protocol 2026-07-28)
by uvicorn with one worker, bearer tokens checked as JWTs against the same
issuer's keys, and a tool with mcp-connect's semantics:

- first call: `input_required` with one URL elicitation `connect_<provider>`
  (a fresh random ticket in the URL) and a `requestState`, sealed by the
  SDK's default `RequestStateBoundary` (AES-256-GCM, bound to the principal
  and the request);
- retry with `inputResponses` accepting and the state: `complete` when the
  in-memory set says the user is connected, `input_required` again if not.

No database: "connected" is a set in memory, filled by `POST /bench/connected`
(the harness's stand-in for the browser flow). Configuration comes from the
environment, set by the harness: BENCH_PORT, BENCH_JWKS (the issuer's JWKS as
JSON), BENCH_ISSUER, BENCH_AUDIENCE, BENCH_ACCESS_LOG (1: uvicorn's default
access log, 0: none).
"""

from __future__ import annotations

import json
import os
import secrets
from typing import Any

import jwt
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestURLParams, InputRequiredResult
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

PORT = int(os.environ["BENCH_PORT"])
BASE = f"http://127.0.0.1:{PORT}"
ISSUER = os.environ["BENCH_ISSUER"]
AUDIENCE = os.environ["BENCH_AUDIENCE"]

# (subject, provider) pairs whose account is "connected".
CONNECTED: set[tuple[str, str]] = set()


class JwtVerifier:
    """Bearer tokens as JWTs signed by the issuer's published keys."""

    def __init__(self, jwks: dict[str, Any]) -> None:
        self.keys = {k.get("kid"): jwt.PyJWK(k) for k in jwks["keys"]}

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            key = self.keys[kid]
            claims = jwt.decode(
                token,
                key,
                algorithms=[key.algorithm_name],
                audience=AUDIENCE,
                issuer=ISSUER,
                options={"require": ["exp", "aud", "sub"]},
            )
        except (jwt.PyJWTError, KeyError):
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or ""),
            scopes=str(claims.get("scope") or "").split(),
            expires_at=claims.get("exp"),
            resource=AUDIENCE,
            subject=claims["sub"],
            claims=claims,
        )


mcp = MCPServer(
    name="bench-python",
    token_verifier=JwtVerifier(json.loads(os.environ["BENCH_JWKS"])),
    auth=AuthSettings(
        issuer_url=ISSUER,
        resource_server_url=f"{BASE}/mcp",
        validate_token_resource=False,
    ),
    log_level="WARNING",
)


def _action(responses: Any, key: str) -> str | None:
    answer = (responses or {}).get(key)
    if answer is None:
        return None
    if isinstance(answer, dict):
        return answer.get("action")
    return getattr(answer, "action", None)


def _account(provider: str, ctx: Context) -> dict[str, Any] | InputRequiredResult:
    token = get_access_token()
    subject = token.subject if token is not None else ""
    key = f"connect_{provider}"
    if ctx.request_state is not None and _action(ctx.input_responses, key) == "accept":
        state = json.loads(ctx.request_state)
        if state.get("provider") == provider and (subject, provider) in CONNECTED:
            return {"provider": provider, "account": subject, "account_id": subject}
    ticket = secrets.token_urlsafe(32)
    params = ElicitRequestURLParams(
        message=f"Connect your {provider} account to continue. Open this link in your browser.",
        url=f"{BASE}/connect?ticket={ticket}",
    )
    return InputRequiredResult(
        input_requests={key: ElicitRequest(params=params)},
        request_state=json.dumps({"provider": provider, "ticket": ticket}),
    )


@mcp.tool()
async def whoami(provider: str, ctx: Context) -> dict[str, Any] | InputRequiredResult:
    """Show the account connected at a provider; asks the user to connect first."""
    return _account(provider, ctx)


@mcp.tool()
async def connect(provider: str, ctx: Context) -> dict[str, Any] | InputRequiredResult:
    """Connect the user's account at a provider."""
    return _account(provider, ctx)


@mcp.custom_route("/bench/connected", methods=["POST"])
async def mark_connected(request: Request) -> Response:
    body = await request.json()
    CONNECTED.add((body["sub"], body["provider"]))
    return JSONResponse({"ok": True})


@mcp.custom_route("/bench/health", methods=["GET"])
async def health(_request: Request) -> Response:
    return JSONResponse({"ok": True})


if __name__ == "__main__":
    app = mcp.streamable_http_app(stateless_http=True, json_response=True)
    access_log = os.environ.get("BENCH_ACCESS_LOG", "1") == "1"
    uvicorn.run(app, host="127.0.0.1", port=PORT, workers=1, log_level="info", access_log=access_log)
