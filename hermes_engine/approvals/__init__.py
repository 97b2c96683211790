"""Shared approvals: a request a tool must have answered by a person before it runs (the terminal's dangerous
commands, MCP tools marked so), and how a press on another replica reaches the waiting turn."""
