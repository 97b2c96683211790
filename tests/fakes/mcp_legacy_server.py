"""An MCP server of the handshake-era protocol, written out by hand over stdio (one JSON-RPC message per
line): it knows no `server/discover` or `subscriptions/listen`, so clients fall back to `initialize`, and it
announces a changed tool list the old way, with `notifications/tools/list_changed`. Its `grow` tool adds a
tool and sends that notification."""

from __future__ import annotations

import json
import sys
from typing import Any

TEXT_ARGUMENT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
tools: dict[str, dict[str, Any]] = {
    "echo": {"name": "echo", "description": "Say the text back.", "inputSchema": TEXT_ARGUMENT},
    "grow": {"name": "grow", "description": "Add a tool with this name and announce the change.",
             "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": False}


def call(name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(result, whether the tool list changed)."""
    if name == "grow":
        added = str(arguments["name"])
        tools[added] = {"name": added, "description": f"An added tool, {added}.", "inputSchema": TEXT_ARGUMENT}
        return text(f"added {added}"), True
    if name in tools:
        return text(f"{name} got: {arguments.get('text', '')}"), False
    return {"content": [{"type": "text", "text": f"no tool {name}"}], "isError": True}, False


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # notifications (initialized, cancelled) and answers need nothing
        method, params, ident = message["method"], message.get("params") or {}, message["id"]
        changed = False
        if method == "initialize":
            result: dict[str, Any] = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                                      "capabilities": {"tools": {"listChanged": True}},
                                      "serverInfo": {"name": "legacy", "version": "1.0"}}
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": list(tools.values())}
        elif method == "tools/call":
            result, changed = call(params["name"], params.get("arguments") or {})
        else:
            send({"id": ident, "error": {"code": -32601, "message": f"Method not found: {method}"}})
            continue
        send({"id": ident, "result": result})
        if changed:
            send({"method": "notifications/tools/list_changed"})


if __name__ == "__main__":
    main()
