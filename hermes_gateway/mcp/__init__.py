"""The MCP client side: the official `mcp` SDK behind the engine's `McpServers` Protocol."""
