"""An MCP client for the end-to-end suite, on the official Python SDK (v2).

It plays the agent's side of the connect flow against the real server: it
calls one tool with a bearer token and, whenever the server needs the user to
open a link, shows that link the way a client would, by printing one JSON line
on stdout, then waits for "the user" (the test, which drives a real browser)
to say what they did, as one JSON line on stdin: {"action": "accept"}, or
"decline" or "cancel". Its last line is the call's outcome.

Styles:
  manual    2026-07-28, the loop by hand: session.call_tool(...,
            allow_input_required=True) -> InputRequiredResult -> retry with
            input_responses= and request_state=.
  callback  2026-07-28, Client(elicitation_callback=...) and the SDK's own
            retry driver.
  legacy    2025-11-25 (mode="legacy"): -32042 URLElicitationRequiredError,
            then the same call again once the user is done.

The token comes from the environment (E2E_MCP_TOKEN), never the command line.
Events on stdout: connected, elicitation, result, error. Nothing secret is
logged on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError

MAX_ROUNDS = 5


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


async def ask_user(url: str, message: str, **extra: Any) -> str:
    """Shows the link; returns what the user did."""
    emit("elicitation", url=url, message=message, **extra)
    line = await anyio.to_thread.run_sync(sys.stdin.readline)
    if not line:
        raise SystemExit("stdin closed while waiting for the user")
    return json.loads(line)["action"]


async def outcome(client: Client, tool: str, result: types.CallToolResult) -> None:
    """Reports the call's result, once it is checked as a model would rely on it.

    The SDK validates a successful result's structured content against the
    tool's declared outputSchema; the server promises that error results
    conform too, so those are validated here the same way. The first text
    block must be that structured content, serialized.
    """
    text = [c.text for c in result.content if isinstance(c, types.TextContent)]
    await client.session.validate_tool_result(tool, result)
    checked = result.structured_content is not None
    if checked and (not text or json.loads(text[0]) != result.structured_content):
        raise SystemExit(f"{tool}: the first text block is not the structured content")
    emit(
        "result",
        is_error=bool(result.is_error),
        structured=result.structured_content,
        text=text,
        checked=checked,
    )


async def elicitation_callback(
    _context: Any, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    if not isinstance(params, types.ElicitRequestURLParams):
        return types.ErrorData(code=types.INVALID_REQUEST, message="only URL elicitations are expected")
    action = await ask_user(params.url, params.message, style="callback")
    return types.ElicitResult(action=action)


async def manual(client: Client, tool: str, args: dict[str, Any]) -> None:
    session = client.session
    result = await session.call_tool(tool, args, allow_input_required=True)
    for round_no in range(1, MAX_ROUNDS + 1):
        if not isinstance(result, types.InputRequiredResult):
            await outcome(client, tool, result)
            return
        responses: types.InputResponses = {}
        for key, request in (result.input_requests or {}).items():
            if not isinstance(request, types.ElicitRequest) or not isinstance(
                request.params, types.ElicitRequestURLParams
            ):
                raise SystemExit(f"unexpected input request {key!r}: {request!r}")
            action = await ask_user(
                request.params.url,
                request.params.message,
                style="manual",
                key=key,
                round=round_no,
                request_state=result.request_state,
            )
            responses[key] = types.ElicitResult(action=action)
        result = await session.call_tool(
            tool,
            args,
            input_responses=responses,
            request_state=result.request_state,
            allow_input_required=True,
        )
    raise SystemExit(f"still input_required after {MAX_ROUNDS} rounds")


async def legacy(client: Client, tool: str, args: dict[str, Any]) -> None:
    for _ in range(MAX_ROUNDS):
        try:
            await outcome(client, tool, await client.call_tool(tool, args))
            return
        except MCPError as e:
            if e.code != types.URL_ELICITATION_REQUIRED:
                raise
            required = UrlElicitationRequiredError.from_error(e.error)
            for elicitation in required.elicitations:
                action = await ask_user(
                    elicitation.url,
                    elicitation.message,
                    style="legacy",
                    code=e.code,
                    elicitation_id=elicitation.elicitation_id,
                )
                if action != "accept":
                    emit("result", is_error=True, structured=None, text=[f"the user chose {action}"], checked=False)
                    return
    raise SystemExit(f"still -32042 after {MAX_ROUNDS} rounds")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the MCP endpoint")
    parser.add_argument("--style", choices=["manual", "callback", "legacy"], required=True)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--args", default="{}", help="the tool's arguments, as JSON")
    opts = parser.parse_args()
    token = os.environ["E2E_MCP_TOKEN"]
    args = json.loads(opts.args)

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30.0, read=60.0),
    )
    async with http:
        client = Client(
            streamable_http_client(opts.url, http_client=http),
            mode="legacy" if opts.style == "legacy" else "auto",
            elicitation_callback=elicitation_callback,
        )
        try:
            async with client:
                emit("connected", protocol_version=client.protocol_version)
                if opts.style == "manual":
                    await manual(client, opts.tool, args)
                elif opts.style == "callback":
                    await outcome(client, opts.tool, await client.call_tool(opts.tool, args))
                else:
                    await legacy(client, opts.tool, args)
        except MCPError as e:
            emit("error", code=e.code, message=e.message, data=e.data)


if __name__ == "__main__":
    anyio.run(main)
