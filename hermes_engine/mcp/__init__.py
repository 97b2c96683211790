"""Tools from MCP servers: the engine's side (naming, budget, access, results); the SDK-facing client
lives in `hermes_gateway/mcp/` behind the `McpServers` Protocol."""
